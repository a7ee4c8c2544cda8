"""Where the wall time of grading one assignment on the GPU goes (issue: a class in <= 10 s each).

Grades ``reference/`` one assignment at a time, each in a fresh process (as
``autograder grade reference --assignment NAME --backend gpu`` would), with both workers (GPU
and emulator) built by a factory of this module that times their own side too. Prints one
table row per assignment (seconds):

- ``wall``: the whole child process, interpreter start to exit; ``startup``: interpreter,
  imports and ``read_course`` (wall minus the grading and the workers' close);
- ``gpu start`` / ``emu start``: a worker's start (Python, imports, PyCUDA init and context);
- ``nvrtc``: NVRTC compiles in the workers (cubin, PTX), module loads included for the GPU;
- ``inputs``: ``cases.make_inputs`` on the grader's main thread, and its waits for inputs
  drawn in the background; ``prepare``: the rest of ``cases.prepare`` (copies, poisoned outputs);
- ``compare``: ``compare.judged``, the float64 reference and the comparison;
- ``gpu launch``: ``GpuBackend.launch`` in the worker (canary staging, copies, launch);
  ``emu launch``: the emulator's launches (safety, reference counters);
- ``ipc``: the pipe between grader and workers (pickling the launches, their outputs and the
  timing requests), the round trips less the workers' own time;
- ``t.setup``: the timing session's uploads and buffers; ``t.rounds``: the timed rounds
  (copies, L2 flushes, launches, checks); ``t.smi``: ``nvidia-smi`` for the clocks;
- ``other``: what is left (the checks, the scoring, the pipeline itself);
- ``inputs bg``: inputs drawn in background threads (overlapping the rest: not in the sum).

Per timed case the JSON also records repeats, both spreads and the timing's seconds; ``--host``
adds single figures of the host work for one 2**26-element case. Results and the commands run:
``bench/results/gpu-grading-time.md``.

Usage (on the device: ``bash bench/device/grading_time.sh LABEL``, which installs and runs it):
    python3 bench/gpu_grading_time.py [--assignments a,b] [--label before] [--out DIR] [--seed 1] [--host]
        [--timed-only]
``--timed-only`` grades the timed items alone, as a batch GPU task does (``grade --timed-only``).
Without a GPU, ``--backend emulator`` tries the script itself.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import functools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = (
    "wall",
    "startup",
    "gpu start",
    "emu start",
    "nvrtc",
    "inputs",
    "prepare",
    "compare",
    "gpu launch",
    "emu launch",
    "ipc",
    "t.setup",
    "t.rounds",
    "t.smi",
    "other",
    "inputs bg",
)


class Profile:
    """Seconds and counts by key, in one process."""

    def __init__(self):
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.counts: dict[str, int] = collections.defaultdict(int)
        self.records: list[dict] = []

    def add(self, key: str, seconds: float) -> None:
        self.seconds[key] += seconds
        self.counts[key] += 1

    def dump(self) -> dict:
        return {"seconds": dict(self.seconds), "counts": dict(self.counts), "records": self.records}


PROFILE = Profile()


def timed(owner, attribute: str, key) -> None:
    """Wrap ``owner.attribute`` so that each call adds its wall time under ``key`` (or key(args))."""
    original = getattr(owner, attribute)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            name = key(*args) if callable(key) else key
            background = threading.current_thread() is not threading.main_thread()
            PROFILE.add(f"{name}.bg" if background else name, time.perf_counter() - started)

    setattr(owner, attribute, wrapper)


# ---- the workers' side ------------------------------------------------------------------------

PHASE = ["none"]  # the contract call the worker is serving: compile, launch or time


def phased(owner, attribute: str, phase: str) -> None:
    """Time ``owner.attribute`` under ``w.PHASE`` and mark calls made within it as of that phase."""
    original = getattr(owner, attribute)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        PHASE[0] = phase
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            PROFILE.add(f"w.{phase}", time.perf_counter() - started)
            PHASE[0] = "none"

    setattr(owner, attribute, wrapper)


def profiled_make(name: str, stats_dir: str):
    """The backend ``name``, built inside its worker with its own calls timed; stats at close."""
    from autograder.backends.registry import make

    in_phase = lambda key: lambda *_args: f"{key}.{PHASE[0]}"  # noqa: E731
    if name == "gpu":
        from autograder.backends import gpu, gpu_timing

        timed(gpu.GpuBackend, "function", in_phase("w.nvrtc"))  # NVRTC, module load, cache hits
        timed(gpu_timing._Session, "__init__", "w.t.setup")
        timed(gpu_timing._Session, "_judge", "w.t.round")
        timed(gpu_timing, "clocks", "w.t.smi")
        original_time_case = gpu.time_case

        def time_case(backend, request):
            started = time.perf_counter()
            timing = original_time_case(backend, request)
            PROFILE.records.append(
                {
                    "case": dict(request.case),
                    "seconds": time.perf_counter() - started,
                    "repeats": timing.repeats,
                    "student_spread": timing.student_spread,
                    "reference_spread": timing.reference_spread,
                    "student_ms": timing.student_ms,
                    "reference_ms": timing.reference_ms,
                    "ratio": timing.student_ms / timing.reference_ms if timing.reference_ms else None,
                    "clocks": dict(timing.clocks),
                }
            )
            return timing

        gpu.time_case = time_case
        owner = gpu.GpuBackend
    else:
        from autograder.backends import emulator

        timed(emulator, "compile_ptx", in_phase("w.nvrtc"))
        owner = emulator.EmulatorBackend
    for phase in ("compile", "launch", "time"):
        if phase in vars(owner):
            phased(owner, phase, phase)
    backend = make(name)
    close = backend.close

    def close_and_dump():
        close()
        path = Path(stats_dir) / f"worker-{name}-{os.getpid()}.json"
        path.write_text(json.dumps({"name": name, **PROFILE.dump()}))

    backend.close = close_and_dump
    return backend


# ---- one assignment, in a child process ---------------------------------------------------------


def grade_one(name: str, stats_dir: Path, seed: int, backend: str, timed_only: bool = False) -> dict:
    """Grade ``name``'s reference (``timed_only``: its timed items alone, as a batch GPU task does,
    with no emulator worker); called on this module by its importable name (``main``), so that the
    workers unpickle ``profiled_make`` from it."""
    from autograder.backends.registry import Backends, backend_class
    from autograder.backends.worker import WorkerBackend
    from autograder.course import cases
    from autograder.course.folder import read_course
    from autograder.grading import pipeline

    course = read_course(ROOT)
    limits = course.rubric.limits
    timed(WorkerBackend, "_spawn", lambda self: f"start.{self.name}")
    timed(WorkerBackend, "_await_ready", lambda self: f"start.{self.name}")
    timed(WorkerBackend, "launch", lambda self, _launch: f"rt.launch.{self.name}")
    timed(WorkerBackend, "compile", lambda self, _program: f"rt.compile.{self.name}")
    timed(WorkerBackend, "time", lambda self, _request: f"rt.time.{self.name}")
    timed(WorkerBackend, "close", lambda self: f"close.{self.name}")
    timed(cases, "make_inputs", "inputs")
    timed(cases, "prepare", "prepare.timing")  # what timing_requests calls
    timed(pipeline, "prepare", "prepare.grading")
    timed(pipeline, "judged", "compare")
    timed(pipeline.CaseRunner, "timings", "timings")
    if hasattr(cases, "Background"):  # inputs drawn in the background: the time waited for them
        timed(cases.Background, "result", "inputs.wait")

    def worker(backend: str) -> WorkerBackend:
        capabilities = backend_class(backend).capabilities
        memory = None if capabilities.runs_natively else int(limits.emulator_mb)
        factory = functools.partial(sys.modules[__name__].profiled_make, backend, str(stats_dir))
        return WorkerBackend(factory, backend, capabilities, compile_s=limits.compile_s, memory_mb=memory)

    safety = worker(backend) if timed_only else worker("emulator")
    grading = worker("gpu") if backend == "gpu" and not timed_only else safety
    for opened in {id(b): b for b in (grading, safety)}.values():
        if hasattr(opened, "prestart"):  # as open_backends does
            opened.prestart()
    started = time.perf_counter()
    try:
        graded = pipeline.grade_submission(
            ROOT / "reference", course, Backends(grading, safety), seed, [name], timed_only=timed_only
        )
    finally:
        grading_s = time.perf_counter() - started
        for opened in {id(b): b for b in (grading, safety)}.values():
            opened.close()
    return {
        "grading_s": grading_s,
        "score": sum(r.score for r in graded.items),
        "points": sum(r.item.points for r in graded.items),
        "items": [(r.item.name, r.score, r.item.points) for r in graded.items],
        **PROFILE.dump(),
    }


def breakdown(parent: dict, workers: list[dict], wall: float) -> dict[str, float]:
    """The table's columns from the child's and the workers' figures."""
    s = collections.defaultdict(float, parent["seconds"])
    w = {name: collections.defaultdict(float) for name in ("gpu", "emulator")}
    for stats in workers:
        for key, value in stats["seconds"].items():
            w[stats["name"]][key] += value
    g, e = w["gpu"], w["emulator"]
    nvrtc = {k: sum(x[f"w.nvrtc.{k}"] for x in (g, e)) for k in ("compile", "launch", "time", "none")}
    ipc = 0.0
    for name, x in w.items():
        round_trips = sum(s[f"rt.{call}.{name}"] for call in ("launch", "compile", "time"))
        ipc += max(0.0, round_trips - s[f"start.{name}"] - x["w.compile"] - x["w.launch"] - x["w.time"])
    columns = {
        "wall": wall,
        "startup": wall - parent["grading_s"] - s["close.gpu"] - s["close.emulator"],
        "gpu start": s["start.gpu"],
        "emu start": s["start.emulator"],
        "nvrtc": sum(nvrtc.values()),
        "inputs": s["inputs"] + s["inputs.wait"],
        "prepare": s["prepare.grading"] + s["prepare.timing"] - s["inputs"],
        "compare": s["compare"],
        "gpu launch": g["w.launch"] - g["w.nvrtc.launch"],
        "emu launch": e["w.launch"] - e["w.nvrtc.launch"],
        "ipc": ipc,
        "t.setup": g["w.t.setup"],
        "t.rounds": g["w.t.round"],
        "t.smi": g["w.t.smi"],
    }
    columns["other"] = wall - sum(v for k, v in columns.items() if k != "wall")
    columns["inputs bg"] = s["inputs.bg"]  # drawn in background threads: overlaps the rest, not summed
    return columns


def run_child(name: str, seed: int, stats_dir: Path, backend: str, timed_only: bool) -> dict:
    stats_dir.mkdir(parents=True, exist_ok=True)
    for old in stats_dir.glob("*.json"):
        old.unlink()
    started = time.perf_counter()
    command = [sys.executable, __file__, "--one", name, "--stats", str(stats_dir), "--seed", str(seed)]
    subprocess.run([*command, "--backend", backend, *(["--timed-only"] if timed_only else [])], check=True)
    wall = time.perf_counter() - started
    parent = json.loads((stats_dir / "grader.json").read_text())
    workers = [json.loads(p.read_text()) for p in stats_dir.glob("worker-*.json")]
    timings = [r for stats in workers for r in stats["records"]]
    return {
        "assignment": name,
        "wall_s": wall,
        "score": parent["score"],
        "points": parent["points"],
        "columns": breakdown(parent, workers, wall),
        "timed_cases": timings,
        "grader": parent,
        "workers": workers,
    }


def device_line() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.strip()
    return "no nvidia-smi"


def table(rows: list[dict]) -> str:
    head = "| assignment | " + " | ".join(COLUMNS) + " | score |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for row in rows:
        cells = [f"{row['columns'][c]:.2f}" for c in COLUMNS]
        lines.append(
            f"| {row['assignment']} | " + " | ".join(cells) + f" | {row['score']:g}/{row['points']:g} |"
        )
    total = {c: sum(r["columns"][c] for r in rows) for c in COLUMNS}
    lines.append("| **all** | " + " | ".join(f"{total[c]:.1f}" for c in COLUMNS) + " | |")
    cases = ["", "| assignment | case | timing s | repeats | spread student | spread reference | ratio |"]
    cases.append("|---|---|---|---|---|---|---|")
    for row in rows:
        for t in row["timed_cases"]:
            case = ",".join(f"{k}={v}" for k, v in t["case"].items())
            cases.append(
                f"| {row['assignment']} | {case} | {t['seconds']:.2f} | {t['repeats']} | "
                f"{t['student_spread']:.5f} | {t['reference_spread']:.5f} | {t['ratio']:.4f} |"
            )
    return "\n".join(lines + cases)


def host_figures() -> str:
    """The grading side's host work for one 2**26-element case (vector_add's perf), one of each."""
    import threading
    from multiprocessing.connection import Pipe

    import numpy as np

    from autograder.contract import LaunchResult
    from autograder.course import cases
    from autograder.course.folder import read_course
    from autograder.grading import compare

    spec = read_course(ROOT).specs["vector_add"]
    source = (ROOT / "reference" / "vector_add.cu").read_text()
    lines = []

    def clock(what: str, step):
        started = time.perf_counter()
        value = step()
        lines.append(f"{what}: {time.perf_counter() - started:.3f} s")
        return value

    rng = np.random.default_rng(1)
    clock("random_array float32 2**26", lambda: cases.random_array(rng, "float32", 1 << 26))
    ref = cases.group_cases(spec, "perf", 1)[0]
    prepared = clock("prepare vector_add n=2**26", lambda: cases.prepare(spec, source, ref, 20))
    c = prepared.inputs["a"] + prepared.inputs["b"]
    result = LaunchResult(outputs={**prepared.inputs, "c": c})
    outcome = compare.CaseOutcome("perf", 0, {}, 0, "gpu")
    clock("judged vector_add n=2**26", lambda: compare.judged(outcome, spec, prepared, result))
    sources = {"student": source, "reference": source}
    request = clock(
        "timing_requests vector_add (3 input sets)",
        lambda: next(cases.timing_requests(spec, sources, "perf", 1, 20)),
    )
    from autograder.backends import worker

    left, right = Pipe()
    send = getattr(worker, "send", type(left).send)  # the grader's own transport where it has one
    receive = getattr(worker, "receive", type(right).recv)
    sender = threading.Thread(target=send, args=(left, request))
    clock("the request to a worker (pickle, send, unpickle)", lambda: (sender.start(), receive(right)))
    sender.join()
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignments", default="", help="comma-separated (default: every one)")
    parser.add_argument("--label", default="", help="what this run measures (before/after)")
    parser.add_argument("--out", type=Path, default=None, help="write gpu-grading-time-LABEL.json/.md here")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backend", default="gpu", help="gpu (default), or emulator to try this script")
    parser.add_argument("--host", action="store_true", help="also time the host work of one big case")
    parser.add_argument("--timed-only", action="store_true", help="the timed items alone (a batch GPU task)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--stats", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        import gpu_grading_time  # this module by its importable name: the workers unpickle from it

        result = gpu_grading_time.grade_one(args.one, args.stats, args.seed, args.backend, args.timed_only)
        (args.stats / "grader.json").write_text(json.dumps(result))
        return
    from autograder.course.folder import read_course

    names = [n for n in args.assignments.split(",") if n] or list(read_course(ROOT).rubric.assignments)
    stats_root = Path(os.environ.get("TMPDIR", "/tmp")) / "gpu-grading-time"
    rows = []
    for name in names:
        rows.append(run_child(name, args.seed, stats_root / name, args.backend, args.timed_only))
        c = rows[-1]["columns"]
        print(f"{name}: {c['wall']:.1f} s ({rows[-1]['score']:g}/{rows[-1]['points']:g})", flush=True)
    header = (
        f"device: {device_line()}\ndate: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
        f"\nlabel: {args.label or '-'}   seed: {args.seed}   python: {sys.version.split()[0]}"
        f"\ncommand: python3 bench/gpu_grading_time.py {' '.join(sys.argv[1:])}"
    )
    text = f"{header}\n\n{table(rows)}\n"
    if args.host:
        text += f"\nhost work, one 2**26-element case:\n{host_figures()}\n"
    print("\n" + text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        suffix = f"-{args.label}" if args.label else ""
        (args.out / f"gpu-grading-time{suffix}.md").write_text(text)
        (args.out / f"gpu-grading-time{suffix}.json").write_text(json.dumps({"header": header, "rows": rows}))


if __name__ == "__main__":
    main()
