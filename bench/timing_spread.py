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

``--passes 1,16`` adds reading-mode rows whose timed rounds may make up to 16 passes over the
input sets (``TimingRequest.max_passes``; grading asks 1).

    python3 bench/timing_spread.py [--assignments transpose,reduction] [--sessions 5] [--passes 1,16]
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


def protocols(passes: list[int]) -> list[tuple[str, type[_Session], int]]:
    """(name, session class, a round's most passes): both modes at one pass a round (what
    grading asks), and reading at each larger number of passes asked for (``--passes``)."""
    more = [("reading", _Session, p) for p in passes if p > 1]
    return [(rule, protocol, 1) for rule, protocol in PROTOCOLS.items()] + more


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


def case_rows(backend: GpuBackend, name: str, spec, sessions: int, passes: list[int]) -> list[dict]:
    source = (ROOT / "reference" / f"{name}.cu").read_text()
    sources = dict.fromkeys(("student", "reference"), source)
    rows = []
    for request in timing_requests(spec, sources, "perf", secret=2027, time_limit_s=60):
        for rule, protocol, most in protocols(passes):
            runs = []
            for _ in range(sessions):
                seen = clocks(backend)
                asked = dataclasses.replace(request, max_passes=most)
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
                        "sm_mhz": seen.get("sm_mhz"),
                        "power_w": seen.get("power_w"),
                    }
                )
            rule = rule if most == 1 else f"{rule}, up to {most} passes a round"
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
        "--passes", default="1", help="comma-separated: a timed round's most passes, reading mode (1 always)"
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
            rows += case_rows(
                backend, name, specs[name], args.sessions, [int(p) for p in args.passes.split(",")]
            )
    finally:
        backend.close()
    print(f"{time.monotonic() - started:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
