"""Grade every known submission with a fixed seed, to show that a change kept every verdict.

Submissions: each assignment's reference and starter, every student variant of
``tests/emulator/variants/``, and every planted bug of ``tests/emulator/test_course.py``,
graded one assignment at a time on the emulator through the ``autograder grade`` command
(so any version of the grader can be compared with any other). Writes
``OUT/<submission>/results.json`` and ``report.json``; with ``--compare BEFORE`` it prints
every difference in scores, outputs and evidence (times, seeds and paths excepted) and
exits 1 when there is one.

    python3 bench/regrade.py --out /tmp/after [--compare /tmp/before] [--jobs 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 7
VOLATILE = {"execution_time", "elapsed_s", "submission", "elapsed_ms", "wall_s"}


def planted_bugs() -> dict:
    sys.path.insert(0, str(ROOT))  # the checkout's grader, installed or not
    path = ROOT / "tests" / "emulator" / "test_course.py"
    loader = importlib.util.spec_from_file_location("course_bugs", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module.BUGS


def submissions(scratch: Path) -> dict[str, tuple[str, Path]]:
    """name -> (assignment, folder holding <assignment>.cu)."""
    found = {}
    for cu in sorted((ROOT / "reference").glob("*.cu")):
        for kind in ("reference", "starter"):
            found[f"{kind}-{cu.stem}"] = (cu.stem, ROOT / kind)
    for cu in sorted((ROOT / "tests" / "emulator" / "variants").glob("*/*.cu")):
        assignment = cu.parent.name
        folder = scratch / f"variant-{assignment}-{cu.stem}"
        folder.mkdir()
        (folder / f"{assignment}.cu").write_text(cu.read_text())
        found[folder.name] = (assignment, folder)
    for bug, (assignment, old, new, _item) in planted_bugs().items():
        source = (ROOT / "reference" / f"{assignment}.cu").read_text()
        source = new if old is None else source.replace(old, new)
        folder = scratch / ("bug-" + assignment + "-" + "".join(c if c.isalnum() else "_" for c in bug))
        folder.mkdir()
        (folder / f"{assignment}.cu").write_text(source)
        found[folder.name] = (assignment, folder)
    return found


def grade(name: str, assignment: str, folder: Path, out: Path) -> str:
    target = out / name
    target.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(folder),
        "--course",
        str(ROOT),
        "--backend",
        "emulator",
        "--seed",
        str(SEED),
        "--assignment",
        assignment,
        "--results",
        str(target / "results.json"),
        "--report",
        str(target / "report"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    return f"{name}: {done.stdout.strip() or done.stderr.strip()[-200:]}"


def stable(value):
    """``value`` without the fields that change from run to run."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def differences(before: Path, after: Path) -> list[str]:
    found = []
    for path in sorted(before.glob("*/*.json")):
        other = after / path.relative_to(before)
        if not other.exists():
            found.append(f"{other}: missing")
            continue
        old, new = stable(json.loads(path.read_text())), stable(json.loads(other.read_text()))
        if old != new:
            found.append(f"{path.relative_to(before)}: differs")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        todo = submissions(Path(scratch))
        with ThreadPoolExecutor(args.jobs) as pool:
            for line in pool.map(lambda item: grade(item[0], *item[1], args.out), todo.items()):
                print(line, flush=True)
    if args.compare is None:
        return 0
    found = differences(args.compare, args.out)
    print("\n".join(found) or "no differences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
