"""A synthetic class graded by ``autograder batch``: time, throughput, memory, sameness, GPU use.

The class: N submissions (default 300), each one kernel file taken in turn from the
submissions of bench/regrade.py (every reference, starter, student variant and planted bug
of the course, over all nine assignments), in a Gradescope export with made-up submitters;
with ``--whole`` each submission holds a kernel of every assignment (the next variant of each),
a full submission as bench/results/batch-gpu.md counts them. It is graded once with
``autograder batch --backend BACKEND`` (default emulator) on an embedded Ray cluster of this
machine, while a sampler adds up the resident memory of every process it starts (Ray's raylet
and workers, each ``grade`` and its backend worker). Then a sample of submissions is graded one
at a time with ``autograder grade --backend emulator`` and each submission's own seed:
results.json and report.json must be identical to the batch's, volatile fields (times, paths)
aside, and on a GPU the items its GPU tasks graded aside. A re-run must find every submission
current (and starts no Ray). On a GPU it also prints the GPU busy time (what the TA reports'
``gpu.busy_s`` add up to: how long the GPU tasks held a GPU) and submissions per GPU-hour, of
the GPUs' wall time (``--gpus``, default ``nvidia-smi``'s count) and of their busy time, and how
far the timed ratios of the class's copies of reference kernels (each should be 1) spread under
the batch's load, the GPU time of the timed launches themselves (launches times medians), and
submissions per GPU-hour over the GPU tasks' phase alone (what a class of hundreds approaches);
``--tasks-per-gpu`` is batch's; ``--keep DIR`` keeps each submission's TA report.
Prints a Markdown table; ``--record FILE`` appends it with the date; ``--sample 0`` leaves out
the comparison.

    python3 bench/batch_class.py [--size 300] [--sample 10] [--record bench/results/batch.md]
    python3 bench/batch_class.py --backend gpu --whole --size 40 [--tasks-per-gpu 3] \
        [--keep DIR] --record bench/results/batch-gpu.md
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.delivery import batch  # noqa: E402 - the checkout's grader

ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


def regrade_submissions(scratch: Path) -> list[tuple[str, Path]]:
    """(assignment, kernel file) of every submission bench/regrade.py grades."""
    spec = importlib.util.spec_from_file_location("regrade", ROOT / "bench" / "regrade.py")
    regrade = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regrade)
    return [(a, folder / f"{a}.cu") for a, folder in regrade.submissions(scratch).values()]


def make_class(size: int, scratch: Path, whole: bool) -> Path:
    (scratch / "kernels").mkdir()
    kernels = regrade_submissions(scratch / "kernels")
    by_assignment: dict[str, list[Path]] = {}
    for assignment, kernel in kernels:
        by_assignment.setdefault(assignment, []).append(kernel)
    export = scratch / "export"
    metadata = []
    for k in range(size):
        chosen = (
            [(a, variants[k % len(variants)]) for a, variants in by_assignment.items()]
            if whole
            else [kernels[k % len(kernels)]]
        )
        folder = export / f"submission_{k:04d}"
        folder.mkdir(parents=True)
        for assignment, kernel in chosen:
            (folder / f"{assignment}.cu").write_bytes(kernel.read_bytes())
        metadata.append(
            f"submission_{k:04d}:\n  :submitters:\n  - :name: Student {k}\n    :sid: '{100000 + k}'\n"
            f"    :email: s{k}@example.edu\n"
        )
    (export / "submission_metadata.yml").write_text("".join(metadata))
    return export


def tree_rss_mb(root: int) -> float:
    """The resident memory of process ``root`` and all its descendants (Ray's raylet, workers, grades)."""
    parents, rss = {}, {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            status = dict(
                line.split(":", 1) for line in (entry / "status").read_text().splitlines() if ":" in line
            )
            rss[int(entry.name)] = int(status.get("VmRSS", "0 kB").split()[0])
        except (OSError, ValueError):
            continue
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(rss.get(pid, 0) for pid in tree) / 1024


class Sampler(threading.Thread):
    """The largest resident memory of a process tree, sampled every 0.5 s."""

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.peak, self.stopped = root, 0.0, threading.Event()

    def run(self):
        while not self.stopped.wait(0.5):
            self.peak = max(self.peak, tree_rss_mb(self.root))


def run_batch(export: Path, out: Path, backend: str, extra: list[str]) -> tuple[float, str, float, float]:
    """Wall time, the last line printed, the peak resident memory of the batch's processes, and
    the seconds after its last submission was graded (the class's files, its reference ledger and
    the class report). What the batch prints is passed on to stderr as it comes, each line with
    the seconds since the start, so a run stopped early still shows how far it got."""
    command = [sys.executable, "-m", "autograder", "batch", str(export), "--out", str(out)]
    command += ["--course", str(ROOT), "--backend", backend, *extra]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    sampler = Sampler(process.pid)
    sampler.start()
    lines = []
    last_graded = 0.0
    for line in process.stdout:  # type: ignore[union-attr]
        print(f"{time.monotonic() - started:7.1f} s  {line}", end="", file=sys.stderr, flush=True)
        lines.append(line.strip())
        if line.startswith(("graded ", "failed ")):
            last_graded = time.monotonic() - started
    process.wait()
    sampler.stopped.set()
    wall = time.monotonic() - started
    last = next((line for line in reversed(lines) if line), "")
    return wall, last.split(" -> ")[0], sampler.peak, wall - last_graded if last_graded else 0.0


def stable(value):
    if isinstance(value, dict):
        return {
            k: stable(v)
            for k, v in value.items()
            if k not in {"execution_time", "elapsed_s", "submission", "wall_s", "gpu"}
        }
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def besides(data: dict, graded_on_gpu: frozenset[str]) -> dict:
    """A results.json or TA report without the items a GPU task graded, and then without the
    totals and backend, which those items change; unchanged when there are none."""
    if not graded_on_gpu:
        return data
    kept = {
        k: v for k, v in data.items() if k not in {"score", "max_score", "output", "backend", "extra_data"}
    }
    for key in ("tests", "items"):
        if key in kept:
            kept[key] = [i for i in kept[key] if i["name"] not in graded_on_gpu]
    return kept


def on_gpu(report: dict) -> frozenset[str]:
    """The items of a batch's TA report that its GPU task graded (their evidence says so)."""
    return frozenset(i["name"] for i in report.get("items", []) if "gpu_service" in i.get("evidence", {}))


def reports(out: Path) -> dict[str, dict]:
    """Each graded submission's TA report, by submission, read once for every figure below."""
    return {path.parent.name: json.loads(path.read_text()) for path in sorted(out.glob("*/report.json"))}


def gpu_busy_s(reports: dict[str, dict]) -> float:
    """How long the class's GPU tasks held a GPU: the TA reports' ``gpu.busy_s`` added up, each
    times its task's ``share`` of the GPU (``--tasks-per-gpu``)."""
    return sum(_gpu(r).get("busy_s", 0.0) * _gpu(r).get("share", 1.0) for r in reports.values())


def gpu_phase_s(reports: dict[str, dict]) -> float:
    """From the first GPU task's start to the last one's end (``gpu.ran_at`` and ``busy_s`` of the
    TA reports, to the second): the class's GPU time without Ray's start, the first compiles and
    the class's files after, which a class of hundreds pays once."""
    spans = []
    for gpu in filter(lambda gpu: gpu.get("ran_at"), map(_gpu, reports.values())):
        start = datetime.datetime.fromisoformat(gpu["ran_at"]).timestamp()
        spans.append((start, start + gpu.get("busy_s", 0.0)))
    return max(end for _, end in spans) - min(start for start, _ in spans) if spans else 0.0


def _gpu(report: dict) -> dict:
    return report.get("gpu") or {}


def timed_launches_s(reports: dict[str, dict]) -> float:
    """The GPU time of the class's timed launches: each timed case's launches of both kernels times
    their medians, from the TA reports (warm-up rounds, flushes and output checks left out): how
    much of the GPU tasks' time the timing's own kernels are."""
    total = 0.0
    for item in (item for report in reports.values() for item in report.get("items", [])):
        for case in ((item.get("evidence") or {}).get("ratio") or {}).get("cases", []):
            if item["check"] == "performance" and "repeats" in case:
                total += case["repeats"] * (case["student_ms"] + case["reference_ms"]) / 1e3
    return total


def keep_reports(out: Path, folder: Path) -> None:
    """Each submission's TA report, as ``folder/<submission>.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    for report in out.glob("*/report.json"):
        shutil.copyfile(report, folder / f"{report.parent.name}.json")


def reference_items(export: Path, reports: dict[str, dict]) -> list[tuple[str, dict]]:
    """(submission, report item) for every item graded on a submitted copy of a reference kernel."""
    items = []
    for submission, report in reports.items():
        for item in report.get("items", []):
            kernel = export / submission / f"{item['assignment']}.cu"
            if kernel.read_bytes() == (ROOT / "reference" / f"{item['assignment']}.cu").read_bytes():
                items.append((submission, item))
    return items


def reference_ratios(items: list[tuple[str, dict]]) -> dict[tuple[str, str], list[float]]:
    """The timed ratios of the submitted copies of reference kernels, by assignment and case:
    each should be 1, so their spread is the timing's under the batch's load."""
    ratios: dict[tuple[str, str], list[float]] = {}
    for _submission, item in items:
        if item["check"] == "performance":
            for case in item["evidence"].get("ratio", {}).get("cases", []):
                ratios.setdefault((item["assignment"], json.dumps(case["case"])), []).append(case["ratio"])
    return ratios


def shortfall_row(items: list[tuple[str, dict]]) -> str:
    """The reference copies' items that scored less than full marks (each should score full): a
    batch that loses points of a reference measures less work than a grading does (2026-12-03:
    two assignments' timed cases lost to a page-locking fault went unseen in three batches)."""
    short = [
        f"{submission} {item['name']} {item['score']:g}/{item['max_score']:g}"
        for submission, item in items
        if item["score"] < item["max_score"] and not item.get("not_run")
    ]
    return f"| reference copies' items short of full marks | {len(short)} of {len(items)}" + (
        f": {'; '.join(short[:8])}{' ...' if len(short) > 8 else ''} |" if short else " |"
    )


def ratio_rows(ratios: dict[tuple[str, str], list[float]]) -> list[str]:
    """The reference copies' ratios: how far any is from 1, and how far copies of one case spread."""
    if not ratios:
        return []
    every = [r for values in ratios.values() for r in values]
    spread = max((max(v) - min(v)) / (sum(v) / len(v)) for v in ratios.values())
    return [
        f"| timed ratios of the reference copies | {len(every)} over {len(ratios)} cases: "
        f"max |ratio - 1| {100 * max(abs(r - 1) for r in every):.2f} %, "
        f"largest spread of one case's copies {100 * spread:.2f} % |"
    ]


def gpu_count() -> int:
    """The GPUs ``nvidia-smi -L`` lists; 1 when it lists none (or is not there)."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return 1
    return max(1, sum(line.startswith("GPU ") for line in listed.splitlines()))


def differs_alone(export: Path, out: Path, sample: int, scratch: Path) -> list[str]:
    """Submissions of a sample whose batch results differ from ``grade`` alone with the same seed."""
    seed = json.loads((out / batch.CLASS_FILE).read_text())["seed"]
    folders = sorted(p for p in export.iterdir() if p.is_dir())
    different = []
    for folder in folders[:: max(1, len(folders) // sample)][:sample]:
        own = batch.submission_seed(seed, batch.Submission(folder.name, folder))
        command = [sys.executable, "-m", "autograder", "grade", str(folder), "--course", str(ROOT)]
        command += ["--backend", "emulator", "--seed", str(own), "--results", str(scratch / "results.json")]
        command += ["--report", str(scratch / "report")]
        subprocess.run(command, capture_output=True, check=False)
        gpu = on_gpu(json.loads((out / folder.name / "report.json").read_text()))
        for name in ("results.json", "report.json"):
            alone = json.loads((scratch / name).read_text())
            batched = json.loads((out / folder.name / name).read_text())
            if stable(besides(batched, gpu)) != stable(besides(alone, gpu)):
                different.append(f"{folder.name}/{name}")
    return different


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=300)
    parser.add_argument("--sample", type=int, default=10)
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--backend", default="emulator", choices=("emulator", "gpu"))
    parser.add_argument("--whole", action="store_true", help="each submission: a kernel of every assignment")
    parser.add_argument("--gpus", type=int, default=None, help="GPUs of the cluster (default: nvidia-smi's)")
    parser.add_argument(
        "--tasks-per-gpu", type=int, default=1, help="GPU tasks sharing a GPU (batch's option)"
    )
    parser.add_argument("--keep", type=Path, default=None, help="copy each submission's TA report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        export, out = make_class(args.size, scratch, args.whole), scratch / "out"
        extra = ["--tasks-per-gpu", str(args.tasks_per_gpu)] if args.backend == "gpu" else []
        wall, summary, peak_mb, after_s = run_batch(export, out, args.backend, extra)
        graded = reports(out)
        busy_s, timed_s, phase_s = gpu_busy_s(graded), timed_launches_s(graded), gpu_phase_s(graded)
        if args.keep:
            keep_reports(out, args.keep)
        copies = reference_items(export, graded)
        ratios = reference_ratios(copies)
        rerun, rerun_summary, _, _ = run_batch(export, out, args.backend, extra)
        different = differs_alone(export, out, args.sample, scratch) if args.sample else []
    each = "a kernel of every assignment each" if args.whole else "one kernel each, all nine assignments"
    gpu_rows = []
    if args.backend == "gpu":
        gpus = args.gpus or gpu_count()
        per_busy = f"{args.size / busy_s * 3600:.0f}" if busy_s else "-"
        gpu_rows = [
            f"| GPUs | {gpus}, {args.tasks_per_gpu} GPU task(s) sharing each |",
            f"| GPU busy time (its GPU tasks' time x their share of a GPU) | {busy_s:.0f} s of "
            f"{gpus * wall:.0f} s "
            f"(GPUs x wall time): {100 * busy_s / (gpus * wall):.0f} % |",
            f"| submissions per GPU-hour (GPUs x wall time) | {args.size / (gpus * wall) * 3600:.0f} |",
            f"| submissions per GPU-hour (GPU busy time) | {per_busy} |",
            f"| GPU tasks' phase (the first one's start to the last one's end) | {phase_s:.0f} s: "
            f"{args.size / (gpus * phase_s) * 3600 if phase_s else 0:.0f} submissions per GPU-hour |",
            f"| GPU time of the timed launches (launches x medians, both kernels) | {timed_s:.0f} s: "
            f"{timed_s / args.size:.1f} s a submission |",
            *ratio_rows(ratios),
        ]
    table = "\n".join(
        [
            f"`bench/batch_class.py --size {args.size}{' --whole' if args.whole else ''}"
            f"{f' --tasks-per-gpu {args.tasks_per_gpu}' if args.backend == 'gpu' else ''}`, "
            f"{datetime.date.today()}, {platform.node()}, "
            f"{os.cpu_count()} cores, {args.backend} backend, embedded Ray",
            "",
            "| measure | value |",
            "|---|---|",
            f"| submissions | {args.size} ({each}) |",
            f"| batch | {summary} |",
            f"| wall time | {wall:.0f} s, of which {after_s:.0f} s after the last grading (the class's "
            "files, its reference ledger, the class report) |",
            f"| submissions per hour | {args.size / wall * 3600:.0f} |",
            shortfall_row(copies),
            *gpu_rows,
            f"| peak resident memory of all its processes (Ray's included) | {peak_mb:.0f} MB |",
            f"| re-run (nothing changed) | {rerun:.0f} s: {rerun_summary} |",
            f"| sample graded alone, same seed | {args.sample} submissions, "
            f"{'identical' if not different else 'DIFFERENT: ' + ', '.join(different)} |",
        ]
    )
    print(table)
    if args.record:
        with args.record.open("a") as f:
            f.write(table + "\n\n")
    sys.exit(1 if different else 0)


if __name__ == "__main__":
    main()
