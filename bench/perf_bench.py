"""The performance-scoring bench (docs/performance.md), run on the GPU; bench/perf-results.md records it.

(a) roofs: every assignment's reference kernel on its first ``perf`` case, timed by the
    grader's own protocol (reference against itself, interleaved, L2 flushed), against its
    physical floor: the fewest bytes over the device copy bandwidth measured here. The
    cuBLAS comparison of the GEMMs is the course bench's (``bench/references``), not redone.
(b) wall time of grading each assignment's reference, and the whole course, on the GPU,
    through the command line (``autograder grade --backend gpu``), as a TA would run it.
(c) stability: one correct-but-slow submission graded 5 times (fresh processes, fresh
    seeds), and the spread of its performance ratio; plus planted submissions and the score
    each gets (uncoalesced, results remembered across calls, no shared memory).

Run on the device from the repository root, PyCUDA importable:

    python3 bench/perf_bench.py --out DIR [--parts abc] [--repeats 5]

Writes ``DIR/perf-bench.json`` and prints a Markdown summary last.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import performance  # noqa: E402
from autograder.backends.gpu import GpuBackend  # noqa: E402
from autograder.backends.gpu_timing import clocks, time_case  # noqa: E402
from autograder.course.cases import timing_requests  # noqa: E402
from autograder.course.spec import load_specs  # noqa: E402

GIB = 1 << 30
GRADE_LIMIT_S = 240

# Planted submissions: (assignment, label, what the rubric should make of it, source).
PLANTED = {
    "plain": (
        "vector_add",
        "correct, the one-line kernel (the handout promises it full marks)",
        """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
""",
    ),
    "few_blocks": (
        "vector_add",
        "correct, only 132 blocks do the work (grid-stride)",
        """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    if (blockIdx.x >= 132) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 132 * blockDim.x) c[i] = a[i] + b[i];
}
""",
    ),
    "uncoalesced": (
        "vector_add",
        "correct, a warp's accesses 32 elements apart",
        """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lanes = n / 32;
    if (i < lanes * 32) { int j = (i % 32) * lanes + i / 32; c[j] = a[j] + b[j]; }
    else if (i < n) c[i] = a[i] + b[i];
}
""",
    ),
    "lazy_when_big": (
        "vector_add",
        "right on small n; on big n right only on its first call",
        """
__device__ unsigned int tickets;
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    __shared__ unsigned int ticket;
    if (threadIdx.x == 0) ticket = n < (1 << 25) ? 0u : atomicAdd(&tickets, 1u);
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && ticket < gridDim.x) c[i] = a[i] + b[i];
}
""",
    ),
    "global_window": (
        "window_sum",
        "correct, five global loads per output, no shared memory",
        """
__global__ void window_sum(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i + 1] + x[i + 2] + x[i + 3] + x[i + 4];
}
""",
    ),
}
STABILITY = "few_blocks"


def environment() -> dict:
    query = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw"
    try:
        smi = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        smi = "no nvidia-smi"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nvidia_smi": smi,
        "python": sys.version.split()[0],
    }


def copy_bandwidth(backend: GpuBackend, nbytes: int = GIB, repeats: int = 20) -> float:
    """Device-to-device copy, bytes read plus bytes written per second (median of events)."""
    cuda = backend.driver
    with backend.active():
        src, dst = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
        cuda.memset_d32(src, 0x3F800000, nbytes // 4)
        times = []
        for _ in range(repeats + 3):
            start, end = cuda.Event(), cuda.Event()
            start.record()
            cuda.memcpy_dtod(dst, src, nbytes)
            end.record()
            end.synchronize()
            times.append(start.time_till(end))
        src.free()
        dst.free()
    return 2 * nbytes / (statistics.median(times[3:]) * 1e-3)


def roofs(bandwidth: float) -> list[dict]:
    """(a) each reference on its first perf case, by the grading protocol, against its floor."""
    backend = GpuBackend()
    try:
        return [
            _roof(backend, name, spec, bandwidth)
            for name, spec in load_specs(ROOT).items()
            if "perf" in spec.cases
            and (ROOT / "reference" / f"{name}.cu").exists()
            and time.monotonic() < DEADLINE[0]
        ]
    finally:
        backend.close()


def _roof(backend: GpuBackend, name: str, spec, bandwidth: float) -> dict:
    case = spec.cases["perf"][0]
    source = (ROOT / "reference" / f"{name}.cu").read_text()
    try:
        sources = dict.fromkeys(("student", "reference"), source)
        request = next(timing_requests(spec, sources, "perf", secret=2026, time_limit_s=60, input_sets=2))
        timing = time_case(backend, dataclasses.replace(request, budget_s=3.0, min_repeats=10))
    except Exception as e:  # one assignment's failure must not end the bench
        return {"assignment": name, "case": dict(case), "error": f"{type(e).__name__}: {e}"}
    work = performance.minimum_work(spec, case)
    floor_ms = 1e3 * work.bytes / bandwidth
    print(
        f"(a) {name:22s} {timing.reference_ms:9.4f} ms  floor {floor_ms:8.4f} ms  "
        f"{100 * floor_ms / timing.reference_ms:5.1f} % of copy roof  self-ratio {timing.ratio:.4f}",
        flush=True,
    )
    return {
        "assignment": name,
        "case": dict(case),
        "reference_ms": timing.reference_ms,
        "self_ratio": timing.ratio,
        "spread": timing.reference_spread,
        "repeats": timing.repeats,
        "bytes": work.bytes,
        "floor_ms": floor_ms,
        "fraction_of_copy_roof": floor_ms / timing.reference_ms,
        "wrong": timing.wrong,
    }


BACKEND = ["gpu"]  # --backend: "emulator" dry-runs parts b and c on a machine without a GPU
DEADLINE = [float("inf")]  # time.monotonic() after which no new grading starts (--budget)


def grade(submission: Path, out: Path, label: str, seed: int, assignment: str | None = None) -> dict:
    """One ``autograder grade --backend gpu`` in a fresh process: wall time, items, ratios."""
    if time.monotonic() > DEADLINE[0]:
        return {"label": label, "wall_s": 0.0, "error": "skipped: the bench's time budget ran out"}
    report = out / f"report-{label}"
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(submission),
        "--backend",
        BACKEND[0],
        "--seed",
        str(seed),
        "--results",
        str(out / f"results-{label}.json"),
        "--report",
        str(report),
    ]
    command += ["--assignment", assignment] if assignment else []
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=GRADE_LIMIT_S, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"label": label, "wall_s": GRADE_LIMIT_S, "error": "timed out"}
    wall = time.monotonic() - started
    if not report.with_suffix(".json").exists():
        return {"label": label, "wall_s": wall, "error": (done.stderr or done.stdout)[-2000:]}
    data = json.loads(report.with_suffix(".json").read_text())
    items = [{k: i[k] for k in ("name", "score", "max_score", "regrade")} | _ratio(i) for i in data["items"]]
    print(f"(b) {label:28s} {wall:7.1f} s  {data['score']:g}/{data['max_score']:g}", flush=True)
    return {
        "label": label,
        "wall_s": wall,
        "score": data["score"],
        "max_score": data["max_score"],
        "items": items,
    }


def _ratio(item: dict) -> dict:
    evidence = item["evidence"].get("ratio")
    if not evidence or item["check"] != "performance":
        return {}
    cases = evidence.get("cases") or [{}]
    return {
        "ratio": evidence.get("ratio"),
        "message": item["output"].splitlines()[0],
        "student_ms": cases[0].get("student_ms"),
        "reference_ms": cases[0].get("reference_ms"),
        "spread": cases[0].get("student_spread"),
        "repeats": cases[0].get("repeats"),
        "clocks": cases[0].get("clocks"),
    }


def planted(out: Path, repeats: int) -> dict:
    """(b, c) planted submissions graded; the stability one ``repeats`` times."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="planted-") as scratch:
        for label, (assignment, _what, source) in PLANTED.items():
            directory = Path(scratch) / label
            directory.mkdir()
            (directory / f"{assignment}.cu").write_text(source)
            runs = repeats if label == STABILITY else 1
            results[label] = [
                grade(directory, out, f"{label}-{k}", seed=100 + k, assignment=assignment)
                for k in range(runs)
            ]
    return results


def sanitizer(out: Path) -> list[dict]:
    """(s) compute-sanitizer on planted bugs (tests/gpu/kernels), raw reports kept in ``out``."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    from gpu_kernels import vector_add

    from autograder.grading import sanitize

    rows = []
    for stem in ("vector_add_unguarded", "vector_add"):
        launch = vector_add(stem, 1000, np.random.default_rng(3))
        for run in sanitize.cross_check([launch], tools=("memcheck", "initcheck"), time_limit_s=120):
            (out / f"sanitizer-{stem}-{run.tool}.log").write_text(run.log)  # raw, for the parser
            rows.append(
                {
                    "kernel": stem,
                    "tool": run.tool,
                    "errors": run.errors,
                    "note": run.note,
                    "findings": [f.message for f in run.findings],
                }
            )
            print(
                f"(s) {stem} {run.tool}: {run.errors} errors, {len(run.findings)} findings {run.note or ''}",
                flush=True,
            )
    return rows


def course(out: Path) -> dict:
    """(b) each assignment's reference graded on its own, then the whole course at once."""
    names = [p.stem for p in sorted((ROOT / "reference").glob("*.cu"))]
    each = [grade(ROOT / "reference", out, f"reference-{name}", seed=7, assignment=name) for name in names]
    return {"each": each, "whole": grade(ROOT / "reference", out, "reference-course", seed=7)}


def stability(runs: list[dict]) -> dict:
    ratios = [i["ratio"] for r in runs for i in r.get("items", []) if i.get("ratio")]
    if len(ratios) < 2:
        return {"ratios": ratios}
    median = statistics.median(ratios)
    return {"ratios": ratios, "median": median, "spread": (max(ratios) - min(ratios)) / median}


def summary(record: dict) -> str:
    env = record["environment"]
    copy = record.get("copy_tb_s", float("nan"))
    lines = [
        f"# perf bench {env['date']}",
        "",
        f"`{env['nvidia_smi']}`",
        "",
        f"device copy: {copy:.3f} TB/s (read + write, 1 GiB)",
    ]
    return "\n".join(lines + _roof_lines(record) + _grade_lines(record) + _stability_lines(record))


def _roof_lines(record: dict) -> list[str]:
    lines = [
        "",
        "| reference | case | ms | floor ms | % of copy roof | self-ratio | repeats |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in record.get("roofs", []):
        if "error" in r:
            lines.append(f"| {r['assignment']} | {r['case']} | {r['error'][:80]} | | | | |")
        else:
            roof = 100 * r["fraction_of_copy_roof"]
            lines.append(
                f"| {r['assignment']} | {r['case']} | {r['reference_ms']:.4f} | {r['floor_ms']:.4f} "
                f"| {roof:.1f} | {r['self_ratio']:.4f} | {r['repeats']} |"
            )
    return lines


def _grade_lines(record: dict) -> list[str]:
    course_runs = record.get("course", {})
    grades = [g for runs in record.get("planted", {}).values() for g in runs]
    grades += [*course_runs.get("each", []), course_runs.get("whole", {})]
    lines = ["", "| graded | wall s | score | performance item |", "|---|---|---|---|"]
    for g in (g for g in grades if g):
        perf = next((i for i in g.get("items", []) if "ratio" in i), {})
        note = perf.get("message", g.get("error", ""))[:100].replace("|", "/").replace("\n", " ")
        lines.append(
            f"| {g['label']} | {g['wall_s']:.1f} | {g.get('score', '-')}/{g.get('max_score', '-')} | {note} |"
        )
    return lines


def _stability_lines(record: dict) -> list[str]:
    s = record.get("stability")
    if not s:
        return []
    ratios = ", ".join(f"{r:.4f}" for r in s["ratios"])
    return [
        "",
        f"stability ({STABILITY}, {len(s['ratios'])} gradings): ratios {ratios}; "
        f"spread {100 * s.get('spread', np.nan):.2f} %",
    ]


def device_figures() -> dict:
    """The device, its clocks and its copy bandwidth."""
    backend = GpuBackend()
    try:
        figures = {
            "device": backend.device_name,
            "clocks_before": clocks(backend),
            "copy_tb_s": copy_bandwidth(backend) / 1e12,
        }
    finally:
        backend.close()
    print(f"device copy {figures['copy_tb_s']:.3f} TB/s", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("perf-bench-out"))
    parser.add_argument(
        "--parts",
        default="csab",
        help="c: planted + stability, s: sanitizer, a: roofs, b: wall times (run in this order)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds; then no new grading")
    parser.add_argument("--backend", default="gpu", help="emulator: dry run of parts b and c, no GPU")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()) / "perf-bench-work",
        help="grading reports (packed into OUT/reports.tar.gz at the end)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    BACKEND[0] = args.backend
    DEADLINE[0] = time.monotonic() + args.budget
    record: dict = {"environment": environment()}
    if args.backend == "gpu":
        record.update(device_figures())
    parts = {
        "c": ("planted", lambda: planted(args.work, args.repeats)),
        "s": ("sanitizer", lambda: sanitizer(args.out)),
        "a": ("roofs", lambda: roofs(record["copy_tb_s"] * 1e12)),
        "b": ("course", lambda: course(args.work)),
    }
    for letter in args.parts:
        key, run = parts[letter]
        try:
            record[key] = run()
        except Exception:
            record[key + "_error"] = traceback.format_exc()
            print(record[key + "_error"], flush=True)
        (args.out / "perf-bench.json").write_text(json.dumps(record, indent=2, default=str))
    if "planted" in record:
        record["stability"] = stability(record["planted"].get(STABILITY, []))
    record["performance_ceilings_used"] = dataclasses.asdict(performance.H200)
    (args.out / "perf-bench.json").write_text(json.dumps(record, indent=2, default=str))
    (args.out / "perf-bench.md").write_text(summary(record) + "\n")
    with tarfile.open(args.out / "reports.tar.gz", "w:gz") as reports:
        reports.add(args.work, arcname="reports")
    print(summary(record))


if __name__ == "__main__":
    main()
