"""``autograder gradescope``: the autograder.zip of Gradescope's standard upload, for some assignments.

At the zip's root, as Gradescope asks: ``setup.sh`` (run once when Gradescope builds the
image) and ``run_autograder`` (run for each submission), both this checkout's own. Beside them
the package's source (``autograder/``, ``pyproject.toml``, ``README.md``) that ``setup.sh``
installs, and the course cut down to the named assignments: ``assignments/<name>/``,
``reference/<name>.cu`` (traffic items compare with it; students never see the image),
``starter/<name>.cu``, a ``rubric.yaml`` of those assignments only, and ``assignments.txt``,
which tells ``run_autograder`` to grade every one of them, submitted or not, so the total is
the rubric's for every student. Entries are sorted and dated 1980-01-01: two builds of the
same files are the same bytes. docs/gradescope.md says how to upload it.
"""

from __future__ import annotations

import os
import stat
import tempfile
import zipfile
from pathlib import Path

import yaml

from autograder.model import Course
from autograder.rubric import load_rubric

CHECKOUT = Path(__file__).resolve().parents[1]
SCRIPTS = ("setup.sh", "run_autograder")  # at the zip's root, executable
PACKAGE_FILES = ("pyproject.toml", "README.md")
ASSIGNMENTS_FILE = "assignments.txt"  # read by run_autograder
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip holds
_LEFT_OUT = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache"})


class BuildError(Exception):
    """The zip cannot be built; the message says what is missing."""


def build(course: Course, names: list[str], out: Path, checkout: Path = CHECKOUT) -> list[str]:
    """Write the zip for ``names`` (known assignments of ``course``) to ``out``; return its entries."""
    names = [name for name in course.rubric.assignments if name in names]  # the rubric's order, once
    entries = {name: (checkout / name, 0o755) for name in SCRIPTS}
    entries |= {name: (checkout / name, 0o644) for name in PACKAGE_FILES}
    entries |= _tree(checkout / "autograder", "autograder")
    for name in names:
        entries |= _tree(course.root / "assignments" / name, f"assignments/{name}")
        for folder in ("reference", "starter"):
            entries[f"{folder}/{name}.cu"] = (course.root / folder / f"{name}.cu", 0o644)
    missing = sorted(str(path) for path, _ in entries.values() if not path.is_file())
    if missing:
        raise BuildError(
            f"cannot build the zip, these files are missing: {', '.join(missing)} (the grader's own files "
            "come from its checkout: run `autograder gradescope` where it was installed with pip install -e)"
        )
    data = {arcname: (path.read_bytes(), mode) for arcname, (path, mode) in entries.items()}
    data["rubric.yaml"] = (_rubric_of(course, names).encode(), 0o644)
    data[ASSIGNMENTS_FILE] = (_assignments_file(names).encode(), 0o644)
    _write_zip(out, data)
    return sorted(data)


def _tree(folder: Path, prefix: str) -> dict[str, tuple[Path, int]]:
    """The files under ``folder`` (no caches, no hidden files, no links), by their name in the zip."""
    found = {}
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _LEFT_OUT and not d.startswith(".")]
        for name in files:
            path = Path(parent) / name
            if name.startswith(".") or name.endswith((".pyc", ".pyo")) or path.is_symlink():
                continue
            found[f"{prefix}/{path.relative_to(folder).as_posix()}"] = (path, 0o644)
    return found


def _rubric_of(course: Course, names: list[str]) -> str:
    """``rubric.yaml`` with only ``names`` under ``assignments`` (its other keys, its items' order kept)."""
    rubric = yaml.safe_load(course.rubric.path.read_text(encoding="utf-8"))
    rubric["assignments"] = {name: rubric["assignments"][name] for name in names}
    header = (
        f"# {course.rubric.path.name} for {', '.join(names)}, written by `autograder gradescope` "
        "(format: docs/design.md)\n"
    )
    text = header + yaml.safe_dump(rubric, sort_keys=False, default_flow_style=None, width=110)
    with tempfile.TemporaryDirectory() as scratch:  # it must load as the grader will load it
        path = Path(scratch) / "rubric.yaml"
        path.write_text(text, encoding="utf-8")
        load_rubric(path, {name: course.specs[name].cases for name in names})
    return text


def _assignments_file(names: list[str]) -> str:
    return (
        "# run_autograder grades each of these assignments, submitted or not, so that every\n"
        "# submission's total is the rubric's (written by `autograder gradescope`).\n"
        + "".join(f"{name}\n" for name in names)
    )


def _write_zip(out: Path, data: dict[str, tuple[bytes, int]]) -> None:
    """Sorted entries, a fixed date and fixed modes: the same files give the same bytes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "w") as archive:
        for arcname in sorted(data):
            content, mode = data[arcname]
            info = zipfile.ZipInfo(arcname, date_time=EPOCH)
            info.create_system = 3  # Unix, so that the modes below are read
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content, compresslevel=9)
    partial.replace(out)
