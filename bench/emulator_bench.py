"""Emulator benchmark: the course's reference kernels on their aligned, ragged and safety
cases, plus larger GEMMs, each timed on the emulator (best of ``--repeat`` runs).

Prints a table per kernel and case: wall time, lane instructions, lane instructions per
second, and the process's peak memory; with ``--record`` appends the table, the machine
and the date to ``bench/emulator-results.md``.

``--small``: only a few launches of a few hundred threads, where Python's fixed cost per
instruction dominates (building executors, dispatch, shared-memory bookkeeping): wall
milliseconds and lane instructions per second of the first launch of each kernel in the
process (decoding its PTX and building every executor) and the best of ``--repeat``
(default 20 there; a later launch of the same kernel and shape runs in the chunk the last
one left, with its executors: ``Chunk.acquire``).

    python bench/emulator_bench.py [--assignments a,b] [--repeat 3] [--small] [--record]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.backends.compiler import compile_ptx  # noqa: E402
from autograder.backends.emulator import EmulatorBackend  # noqa: E402
from autograder.course.cases import GroupCase, prepare  # noqa: E402
from autograder.course.spec import load_specs  # noqa: E402
from autograder.grading.compare import compare_outputs  # noqa: E402

GROUPS = ("aligned", "ragged", "safety")
BIG_GEMMS = {  # assignment -> extra cases (GEMM kernels at 256^3)
    "matmul_naive": [{"M": 256, "N": 256, "K": 256}],
    "gemm_tiled": [{"T": 16, "M": 256, "N": 256, "K": 256}],
    "matmul_register_tile": [{"V": 4, "M": 256, "N": 256, "K": 256}],
    "matmul_block_tile": [
        {"L": 64, "V": 8, "S": 8, "M": 256, "N": 256, "K": 256},
        {"L": 32, "V": 4, "S": 8, "M": 256, "N": 256, "K": 256},
    ],  # the course's tile
}
SMALL = (  # (assignment, case): launches of a few hundred to a few thousand threads
    ("matmul_block_tile", {"L": 32, "V": 4, "S": 8, "M": 64, "N": 64, "K": 64}),  # 4 blocks of 64
    ("gemm_tiled", {"T": 16, "M": 64, "N": 64, "K": 64}),  # 16 blocks of 256
    ("reduction", {"T": 256, "G": 4, "n": 1000}),  # 4 blocks of 256
    ("window_sum", {"T": 256, "n": 256}),  # 1 block of 256
    ("vector_add", {"n": 1000}),
)


def run_case(backend, spec, source: str, case, seed: int, repeat: int) -> dict:
    prepared = prepare(spec, source, GroupCase("bench", 0, case, seed), 600)
    start = time.perf_counter()
    compile_ptx(prepared.launch.program)
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = backend.launch(prepared.launch)
        times.append(time.perf_counter() - start)
    best = min(times)
    outputs, _modified = compare_outputs(spec, prepared, result)
    lanes = result.counters.totals["lane_instructions"]
    return {
        "wall_s": best,
        "first_s": times[0],  # decoding the PTX and building every executor (later: Chunk.acquire)
        "compile_s": compile_s,
        "lanes": lanes,
        "rate": lanes / best,
        "ok": all(not o.wrong for o in outputs),
        "findings": len(result.findings),
    }


def rows(assignments: list[str], repeat: int):
    course = load_specs(ROOT)
    backend = EmulatorBackend()
    for name in assignments:
        spec = course[name]
        source = (ROOT / "reference" / f"{name}.cu").read_text()
        cases = [(g, i, c) for g in GROUPS for i, c in enumerate(spec.cases.get(g, ()))]
        cases += [("bench", 0, case) for case in BIG_GEMMS.get(name, ())]
        for group, index, case in cases:
            try:
                row = run_case(backend, spec, source, case, 1000 + index, repeat)
            except Exception as e:  # a kernel the emulator cannot run is reported, not fatal
                row = {"error": f"{type(e).__name__}: {str(e)[:80]}"}
            yield name, group, case, row


def small_rows(repeat: int):
    course = load_specs(ROOT)
    backend = EmulatorBackend()
    for name, case in SMALL:
        source = (ROOT / "reference" / f"{name}.cu").read_text()
        yield name, case, run_case(backend, course[name], source, case, 1000, repeat)


def format_row(name, group, case, row) -> str:
    params = ",".join(f"{k}={v}" for k, v in case.items())
    if "error" in row:
        return f"| {name} | {group} | {params} | | | | {row['error']} |"
    verdict = "ok" if row["ok"] and not row["findings"] else f"WRONG/{row['findings']} findings"
    return (
        f"| {name} | {group} | {params} | {row['wall_s']:.3f} | {row['lanes'] / 1e6:.2f} | "
        f"{row['rate'] / 1e6:.1f} | {verdict} |"
    )


def small_table(repeat: int) -> tuple[list[str], str]:
    """The few-thread launches (``SMALL``), printed as they run: (table lines, summary)."""
    lines = [
        "| assignment | case | first ms | first M lane instr/s | best ms | best M lane instr/s "
        "| lane instr (M) | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    wall = lanes = 0.0
    for name, case, row in small_rows(repeat):
        params = ",".join(f"{k}={v}" for k, v in case.items())
        verdict = "ok" if row["ok"] and not row["findings"] else f"WRONG/{row['findings']} findings"
        lines.append(
            f"| {name} | {params} | {row['first_s'] * 1e3:.2f} | {row['lanes'] / row['first_s'] / 1e6:.1f} | "
            f"{row['wall_s'] * 1e3:.2f} | {row['rate'] / 1e6:.1f} | {row['lanes'] / 1e6:.3f} | {verdict} |"
        )
        print(lines[-1], flush=True)
        wall, lanes = wall + row["wall_s"], lanes + row["lanes"]
    return lines, f"\nSmall launches: {wall * 1e3:.1f} ms in all, {lanes / wall / 1e6:.1f} M lane instr/s"


def course_table(names: list[str], repeat: int) -> tuple[list[str], str]:
    """Every reference on its course cases and the larger GEMMs, printed as they run."""
    lines = [
        "| assignment | group | case | wall s | lane instr (M) | M lane instr/s | result |",
        "|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    course_s = 0.0
    start = time.perf_counter()
    for name, group, case, row in rows(names, repeat):
        lines.append(format_row(name, group, case, row))
        print(lines[-1], flush=True)
        if "wall_s" in row and group in GROUPS:
            course_s += row["wall_s"] + row["compile_s"]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return lines, (
        f"\nCourse cases (aligned + ragged + safety of every reference, compile included): "
        f"{course_s:.1f} s; bench wall {time.perf_counter() - start:.1f} s; "
        f"peak memory {peak_mb:.0f} MB"
    )


def machine() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    cpu = next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
        platform.processor(),
    )
    return (
        f"{platform.node()} · {cpu} · {os.cpu_count()} cores · Python {platform.python_version()} · "
        f"numpy {np.__version__}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--assignments", default="", help="comma-separated; default: every assignment")
    parser.add_argument(
        "--repeat", type=int, default=0, help="runs per case, the best reported (3; --small: 20)"
    )
    parser.add_argument("--small", action="store_true", help="only the few-thread launches (SMALL)")
    parser.add_argument("--record", action="store_true", help="append the table to bench/emulator-results.md")
    args = parser.parse_args()
    repeat = args.repeat or (20 if args.small else 3)
    if args.small:
        lines, summary = small_table(repeat)
    else:
        names = args.assignments.split(",") if args.assignments else sorted(load_specs(ROOT))
        lines, summary = course_table(names, repeat)
    print(summary)
    if args.record:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        with open(ROOT / "bench" / "emulator-results.md", "a") as f:
            f.write(
                f"\n## {stamp}\n\nMachine: {machine()}. Best of {repeat} runs per case, "
                "one process (numpy elementwise work is single-threaded).\n\n"
            )
            f.write("\n".join(lines) + "\n" + summary + "\n")


if __name__ == "__main__":
    main()
