"""How far a performance ratio moves between gradings, and what a timing costs the GPU (H200 only).

Each timed case of the course's short-kernel assignments is timed reference against reference
(the self-ratio, which should be 1), ``--sessions`` times, each a fresh timing session as a
grading makes (interleaved launches, rotating input sets, L2 flush, warm-up round, repeats
until the ratio is known to 0.08 %), in two modes of ``gpu_timing._Session``: ``reading`` (what
grading does: each input set read where it was uploaded, outputs poisoned by a memset) and
``restoring`` (every set's inputs copied back from their pristine copies before each launch,
what a kernel that writes its ``const`` inputs gets; until 2026-12-03 every launch was preceded
by such a copy). From the very same launches it computes two estimators of the ratio:

- ``medians``: the student's median over the reference's (what grading reports);
- ``paired``: the median of the per-pair ratios, each student launch over the reference launch
  that ran next to it on the same input set, so that a change between rounds cancels in each
  pair (shown for comparison).

Prints, per case and mode: the kernel's time, the launches, the GPU seconds of a session,
the spread of the self-ratios across sessions ((max - min) / median: the figure issue 27 holds
to 0.2 %), each session's self-ratios and SM clock, and the smallest step between two launch
times (the events' resolution as the launches show it: a median moves by no less). The JSON
(``--out``) adds each session's 10th, 50th and 90th percentile of single launches. Results:
``bench/results/timing-spread.md``.

``--samples`` keeps every timed launch's milliseconds in the JSON, each kernel's in launch order
(a round's pairs run in ``gpu_timing._Session._order``'s order).

``--in-flight 1`` adds reading-mode rows with one timed round queued on the GPU at a time, the
host waiting for each before it queues the next (``TimingRequest.rounds_in_flight``; grading
queues 2, as until 2026-12-03 it queued 1); ``--min-repeats 15`` adds reading-mode
rows that may stop after 15 launches of each kernel (``TimingRequest.min_repeats``; grading asks
30), the stop rule otherwise the same.

    python3 bench/timing_spread.py [--assignments transpose,reduction] [--sessions 5] [--in-flight 1]
        [--min-repeats 15] [--samples]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.backends.gpu import GpuBackend  # noqa: E402
from autograder.backends.gpu_timing import _Session, clocks  # noqa: E402
from autograder.contract import TimingRequest  # noqa: E402
from autograder.course.cases import timing_requests  # noqa: E402
from autograder.course.spec import load_specs  # noqa: E402

DEFAULT = ("vector_add", "transpose", "reduction", "window_sum")


class Restoring(_Session):
    """The session as a kernel that writes its inputs makes it: every set's inputs restored
    before each launch."""

    def __init__(self, backend, request):
        super().__init__(backend, request)
        self.restoring = True


PROTOCOLS = {"reading": _Session, "restoring": Restoring}


def protocols(in_flight: list[int], minimums: list[int]) -> list[tuple[str, type[_Session], dict]]:
    """(name, session class, what it changes in the request): both modes as grading asks them,
    reading with each other number of rounds in flight (``--in-flight``), and reading with each
    other least number of launches (``--min-repeats``)."""
    more = [
        (f"reading, {k} in flight", _Session, {"rounds_in_flight": k})
        for k in in_flight
        if k != TimingRequest.rounds_in_flight
    ]
    fewer = [
        (f"reading, at least {m} launches", _Session, {"min_repeats": m})
        for m in minimums
        if m != TimingRequest.min_repeats
    ]
    return [(rule, protocol, {}) for rule, protocol in PROTOCOLS.items()] + more + fewer


def session_samples(
    backend: GpuBackend, request, protocol: type[_Session]
) -> tuple[dict[str, list[float]], float]:
    """One timing session's timed launches, by kernel, in launch order, and its seconds."""
    backend.check_usable()
    started = time.monotonic()
    with backend.active():
        session = protocol(backend, request)
        try:
            samples, wrong = session.measure()
        finally:
            session.free()
    if wrong:
        raise RuntimeError(wrong)
    return samples, time.monotonic() - started


def estimators(samples: dict[str, list[float]]) -> dict[str, float]:
    student, reference = (np.asarray(samples[w]) for w in ("student", "reference"))
    return {
        "medians": float(np.median(student) / np.median(reference)),
        "paired": float(np.median(student / reference)),
    }


def step_us(launches_ms: np.ndarray) -> float:
    """The smallest difference between two distinct launch times, in microseconds: the events'
    resolution, as far as these launches show it (a median cannot move by less)."""
    gaps = np.diff(np.unique(launches_ms))
    return float(1000 * gaps.min()) if gaps.size else float("nan")


def spread(values: list[float]) -> float:
    return float((max(values) - min(values)) / np.median(values)) if values else float("nan")


def case_rows(
    backend: GpuBackend,
    name: str,
    spec,
    sessions: int,
    in_flight: list[int],
    minimums: list[int],
    keep_samples: bool = False,
) -> list[dict]:
    source = (ROOT / "reference" / f"{name}.cu").read_text()
    sources = dict.fromkeys(("student", "reference"), source)
    rows = []
    for request in timing_requests(spec, sources, "perf", secret=2027, time_limit_s=60):
        for rule, protocol, changes in protocols(in_flight, minimums):
            runs = []
            for _ in range(sessions):
                seen = clocks(backend)
                asked = dataclasses.replace(request, **changes)
                samples, seconds = session_samples(backend, asked, protocol)
                all_launches = np.asarray(samples["student"] + samples["reference"])
                runs.append(
                    {
                        **estimators(samples),
                        "repeats": len(samples["student"]),
                        "seconds": seconds,
                        "ms": float(np.median(all_launches)),
                        "p10_p50_p90": [float(x) for x in np.percentile(all_launches, [10, 50, 90])],
                        "step_us": step_us(all_launches),
                        **({"samples": samples} if keep_samples else {}),
                        "sm_mhz": seen.get("sm_mhz"),
                        "power_w": seen.get("power_w"),
                    }
                )
            row = {"assignment": name, "case": dict(request.case), "rule": rule, "runs": runs}
            for estimator in ("medians", "paired"):
                row[f"{estimator}_spread"] = spread([r[estimator] for r in runs])
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    runs = row["runs"]
    case = ",".join(f"{k}={v}" for k, v in row["case"].items())
    return (
        f"| {row['assignment']} | {case} | {row['rule']} | {np.median([r['ms'] for r in runs]):.4f} | "
        f"{min(r['repeats'] for r in runs)}-{max(r['repeats'] for r in runs)} | "
        f"{np.median([r['seconds'] for r in runs]):.2f} | "
        f"{100 * row['medians_spread']:.3f} | {100 * row['paired_spread']:.3f} | "
        f"{_values(runs, 'medians')} | {_values(runs, 'paired')} | "
        f"{' '.join(str(r['sm_mhz']) for r in runs)} | {min(r['step_us'] for r in runs):.3f} |"
    )


def _values(runs: list[dict], estimator: str) -> str:
    return " ".join(f"{r[estimator]:.4f}" for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--assignments", default=",".join(DEFAULT))
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="JSON of every session")
    parser.add_argument(
        "--min-repeats", default="", help="comma-separated: least launches of each kernel, reading mode"
    )
    parser.add_argument(
        "--samples", action="store_true", help="keep every launch's time, in launch order, in the JSON"
    )
    parser.add_argument(
        "--in-flight", default="", help="comma-separated: timed rounds queued at a time, reading mode"
    )
    args = parser.parse_args()
    specs = load_specs(ROOT)
    backend = GpuBackend()
    started = time.monotonic()
    print(f"{backend.device_name}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(
        "| assignment | case | protocol | kernel ms | launches each | session s | spread medians % "
        "| spread paired % | self-ratios (medians) | self-ratios (paired) | SM MHz | event step us |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    try:
        for name in args.assignments.split(","):
            in_flight = [int(k) for k in args.in_flight.split(",") if k]
            minimums = [int(m) for m in args.min_repeats.split(",") if m]
            rows += case_rows(backend, name, specs[name], args.sessions, in_flight, minimums, args.samples)
    finally:
        backend.close()
    print(f"{time.monotonic() - started:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
