"""The package under mypy (pinned in the ``test`` extra, configured in pyproject.toml): the strict
layers (the root, ``course/``, ``grading/``) have no error at all; every other module has no more
errors than ``tests/unit/data/mypy-baseline.json`` records for it, and when it has fewer the
baseline must come down with it, so the count only ever shrinks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: mypy's own dependency reads TOML there
    import tomli as tomllib

pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "tests/unit/data/mypy-baseline.json"
ERROR = re.compile(r"^(autograder/[\w/]+\.py):\d+: error: ", re.M)


def strict_patterns() -> list[str]:
    """The modules pyproject.toml holds to mypy's strict flags (the override that disallows untyped defs)."""
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    return [m for o in overrides if o.get("disallow_untyped_defs") for m in o["module"]]


def module_of(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def problems(errors: Counter[str], baseline: dict[str, int], strict: list[str]) -> list[str]:
    """What is wrong with mypy's error count per file against the baseline and the strict layers."""
    found = []
    for path in sorted(errors.keys() | baseline.keys()):
        count, allowed = errors.get(path, 0), baseline.get(path, 0)
        if any(fnmatch(module_of(path), pattern) for pattern in strict) and (count or allowed):
            found.append(f"{path}: {count} error(s) in a strict layer (none allowed, none in the baseline)")
        elif count > allowed:
            found.append(f"{path}: {count} errors, the baseline allows {allowed}: fix the new ones")
        elif count < allowed:
            found.append(f"{path}: {count} errors, fewer than the baseline's {allowed}: lower it to {count}")
    return found


def test_mypy_finds_no_new_error_and_none_in_the_strict_layers(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1), done.stderr  # 2: mypy itself failed (config, crash)
    errors = Counter(ERROR.findall(done.stdout))
    found = problems(errors, json.loads(BASELINE.read_text()), strict_patterns())
    assert not found, "\n".join(found) + "\n\nmypy says:\n" + done.stdout[-6000:]


def test_the_count_catches_a_new_error_a_fixed_one_and_any_in_a_strict_layer():
    strict = strict_patterns()
    assert "autograder.grading.*" in strict and "autograder.contract" in strict
    baseline = {"autograder/emulator/ops.py": 3}
    assert problems(Counter({"autograder/emulator/ops.py": 3}), baseline, strict) == []
    assert "fix the new ones" in problems(Counter({"autograder/emulator/ops.py": 4}), baseline, strict)[0]
    assert "lower it to 2" in problems(Counter({"autograder/emulator/ops.py": 2}), baseline, strict)[0]
    assert "strict layer" in problems(Counter({"autograder/grading/checks.py": 1}), {}, strict)[0]
    assert "strict layer" in problems(Counter(), {"autograder/contract.py": 1}, strict)[0]
