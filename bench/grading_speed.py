"""What a grading costs on a machine without a GPU (issue 27's table), for one checkout.

Each figure is measured in fresh processes, as a grader meets it:

- ``autograder grade reference`` on the emulator, the whole course: CPU seconds (user and
  system, the grader and every process it waited for: the emulator worker, NVRTC's children),
  wall seconds and the largest process's peak memory; once with an empty compile cache
  (``AUTOGRADER_COMPILE_CACHE`` a fresh folder: what a first grading on a machine pays),
  once with the cache that grading filled (every later grading: its listed cases' reference
  runs kept, ``grading/reference_cache.py``; its drawn cases new), and once more at that seed
  (a regrade: every reference count kept); each at a fixed seed, whose drawn sizes make a
  grading cost anything from 6 to 12 s here, so that checkouts compare on the same cases;
- NVRTC compiling a kernel that includes ``cooperative_groups.h``, in a fresh process: with an
  empty cache and with the cache filled.

The checkout's bytecode is compiled first (``compileall``), as an installed grader has it
(``setup.sh``'s ``pip install`` compiles it, the ``Dockerfile`` too): without it, as on a
machine that sets ``PYTHONDONTWRITEBYTECODE``, every process compiles each module it imports
(0.5 to 1 s of a grading's CPU on the 2-core VM), which an installed grader does not pay.

``--root`` measures another checkout (a ``git worktree`` of an earlier commit: its package is
imported from there; a checkout without the cache ignores the variable), so before and after
are measured side by side on one machine. The best of ``--runs`` is kept (the machine's other
work only adds). ``--record`` appends the table, the machine and the date to
``bench/results/grading-speed.md``. The emulator's own launch speed (first launches, small
launches) is ``bench/emulator_bench.py --small``'s.

    python bench/grading_speed.py [--root CHECKOUT] [--label after] [--runs 3] [--record]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CG_KERNEL = "tests/emulator/corpus/cg_scan.cu"
COMPILE = """
import sys, time
from pathlib import Path
from autograder.backends.compiler import compile_ptx
from autograder.contract import Program
path = Path(sys.argv[1])
started = time.perf_counter()
compile_ptx(Program(path.read_text(), path.name, sys.argv[2]))
print(time.perf_counter() - started)
"""


def measured(command: list[str], root: Path, cache: Path) -> dict[str, float]:
    """``command`` run to its end in a scratch folder, importing ``root``'s package."""
    env = {**os.environ, "PYTHONPATH": str(root), "AUTOGRADER_COMPILE_CACHE": str(cache)}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(
            command, cwd=scratch, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
        _pid, status, usage = os.wait4(process.pid, 0)  # the child's usage with its descendants'
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        stdout = out.read()
    if process.returncode not in (0, 1):  # grade exits 1 when a reference is not full marks: still timed
        raise RuntimeError(f"{command[:4]} exited {process.returncode}: {stdout[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"cpu_s": cpu, "wall_s": wall, "peak_mb": usage.ru_maxrss / 1024, "stdout": stdout}


def grade_rows(root: Path, runs: int) -> list[tuple[str, dict]]:
    """A grading with an empty cache, one on a machine that graded before (another seed: its drawn
    cases are new), and that grading again (the same seed: a regrade)."""
    command = [sys.executable, "-m", "autograder", "grade", str(root / "reference"), "--course", str(root)]
    command += ["--backend", "emulator", "--results", "results.json", "--report", "report"]
    cold, warm, same_seed = [], [], []
    for run in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            compiles = Path(cache) / "compiles"
            cold.append(measured([*command, "--seed", str(2 * run + 1)], root, compiles))
            warm.append(measured([*command, "--seed", str(2 * run + 2)], root, compiles))
            same_seed.append(measured([*command, "--seed", str(2 * run + 2)], root, compiles))
    return [
        ("grade reference, emulator, compile cache empty", best(cold)),
        ("the same, cache filled (another seed)", best(warm)),
        ("the same seed again (a regrade: every reference count kept)", best(same_seed)),
    ]


def compile_rows(root: Path, runs: int) -> list[tuple[str, dict]]:
    command = [sys.executable, "-c", COMPILE, str(root / CG_KERNEL), "compact"]
    return cold_and_warm("compile of a cooperative_groups kernel", command, root, runs, timed_inside=True)


def cold_and_warm(
    what: str, command: list[str], root: Path, runs: int, timed_inside: bool
) -> list[tuple[str, dict]]:
    """``command`` run with an empty compile cache, then again with the cache it filled."""
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(measured(command, root, Path(cache) / "compiles"))
            warm.append(measured(command, root, Path(cache) / "compiles"))
    return [
        (f"{what}, compile cache empty", best(cold, timed_inside)),
        ("the same, cache filled", best(warm, timed_inside)),
    ]


def best(figures: list[dict], timed_inside: bool = False) -> dict:
    """The run that took the least CPU; with the seconds the command printed last when it times
    itself (``timed_inside``)."""
    chosen = min(figures, key=lambda f: f["cpu_s"])
    inside = float(chosen["stdout"].split()[-1]) if timed_inside else None
    return {**chosen, "compile_s": inside}


def table(label: str, rows: list[tuple[str, dict]]) -> str:
    lines = [
        "| what | checkout | CPU s | wall s | peak MB | compile s (in process) |",
        "|---|---|---|---|---|---|",
    ]
    for what, f in rows:
        compile_s = f"{f['compile_s']:.3f}" if f["compile_s"] is not None else ""
        lines.append(
            f"| {what} | {label} | {f['cpu_s']:.2f} | {f['wall_s']:.2f} | {f['peak_mb']:.0f} | {compile_s} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--label", default=None, help="its name in the table (default: its commit)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    root = args.root.resolve()
    label = (
        args.label
        or subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    )
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "autograder")], check=True)
    rows = compile_rows(root, args.runs) + grade_rows(root, args.runs)
    text = table(label, rows)
    machine = f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    stamp = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    print(f"{machine}, {stamp}, best of {args.runs}\n\n{text}")
    if args.record:
        with (ROOT / "bench/results/grading-speed.md").open("a") as out:
            out.write(f"\n## {label}: {machine}, {stamp}, best of {args.runs}\n\n{text}\n")


if __name__ == "__main__":
    main()
