"""Performance scoring: a ratio student/reference turned into a fraction of an item's points.

The ratio comes from one of two measurements, and the evidence says which:

- ``time`` (a backend that ``measures_time``: the GPU): medians of interleaved, L2-flushed,
  output-checked launches (``backends/gpu_timing.py``). The ratio is checked against a
  physical floor (the fewest bytes over the measured copy bandwidth, the flops over the
  peak rate): a student time under the floor is not trusted but flagged for a TA.
- a counter name (``global_load_sectors``, ``shared_load_wavefronts``, ... see
  ``Counters`` in ``backends/base.py``): the emulator's count for the student kernel over
  the reference kernel's count on the same case. Exact, so it needs no GPU.

An item whose metric is ``time`` graded without a GPU is not scored 0: its evidence says
"not run: needs a GPU" and carries ``regrade: True`` so that a TA reruns it on a GPU.

Scoring: full marks at or below ``full_at``, none at or above ``zero_at``, and between them
the fraction falls linearly in ``log(ratio)``, so that "twice as slow" costs the same at any
speed. Ratios from several cases combine by their geometric mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeGuard

import numpy as np

from autograder.contract import PRECISE_SPREAD, Timing
from autograder.course.spec import Array, Case, Spec, evaluate
from autograder.course.vocabulary import TIME
from autograder.feedback import counted

FLOOR_SLACK = 0.9  # a measured time under 90 % of the physical floor is flagged


def score_fraction(ratio: float, full_at: float, zero_at: float) -> float:
    """The fraction of an item's points a ratio student/reference earns."""
    if not full_at < zero_at:
        raise ValueError(f"full_at ({full_at}) must be below zero_at ({zero_at})")
    if math.isnan(ratio) or ratio >= zero_at:
        return 0.0
    if ratio <= full_at:
        return 1.0
    return math.log(zero_at / ratio) / math.log(zero_at / full_at)


def combined_ratio(ratios: Sequence[float]) -> float:
    """Geometric mean of per-case ratios (an infinite, NaN or zero ratio makes it so)."""
    if not ratios:
        raise ValueError("no ratios to combine")
    values = np.asarray(ratios, dtype=np.float64)
    if np.isnan(values).any():
        return math.nan
    if np.isinf(values).any():
        return math.inf
    if (values == 0).any():  # a counter the student's kernel never incurs: nothing to average
        return 0.0
    return float(np.exp(np.log(values).mean()))


# --- physical floor -------------------------------------------------------------------


@dataclass(frozen=True)
class Work:
    """The least any correct kernel must do on a case: what the physical floor is made of."""

    bytes: int  # each array argument read or written once
    flops: float = 0.0  # the spec's ``flops`` (the GEMMs: ``2 * M * N * K``)
    half: bool = False  # half-precision inputs: the half-precision flop ceiling applies


@dataclass(frozen=True)
class Ceilings:
    """What the device can do at best, measured on it (``bench/perf-results.md``)."""

    copy_bytes_per_s: float  # device-to-device copy, bytes read + bytes written per second
    peak_flops: float  # the fastest arithmetic a correct kernel on float32 inputs could use
    peak_half_flops: float  # the same on half-precision inputs

    def floor_ms(self, work: Work) -> float:
        """The time no kernel can beat: the larger of bytes over bandwidth, flops over peak."""
        peak = self.peak_half_flops if work.half else self.peak_flops
        return 1e3 * max(work.bytes / self.copy_bytes_per_s, work.flops / peak)


# Measured on an H200, 2026-11-29 (docs/gpu-facts.md): a 1 GiB device copy runs at 4.14 TB/s.
# The flop ceilings are the datasheet's dense tensor rates, TF32 for float32 inputs and FP16
# for half inputs, the fastest a course kernel could go, so that only a truly impossible time
# is flagged (a kernel that replays a remembered product instead of computing it, say).
H200 = Ceilings(copy_bytes_per_s=4.14e12, peak_flops=495e12, peak_half_flops=989e12)
CEILINGS_BY_DEVICE = {"NVIDIA H200": H200}


def minimum_work(spec: Spec, case: Case) -> Work:
    """Each array argument read or written once, the spec's flops, and the input precision."""
    arrays = [arg for arg in spec.args if isinstance(arg, Array)]
    return Work(
        bytes=sum(int(evaluate(arg.size, case)) * np.dtype(arg.dtype).itemsize for arg in arrays),
        flops=float(evaluate(spec.flops, case)),
        half=any(arg.dtype in ("float16", "bfloat16") for arg in arrays),
    )


def with_work(timing: Timing, work: Work) -> Timing:
    """``timing`` with the case's ``work``: its flops (for the roofline's measured point) and its
    device's physical floor for it (none on a device without ceilings)."""
    ceilings = CEILINGS_BY_DEVICE.get(timing.device)
    return replace(
        timing, floor_ms=ceilings.floor_ms(work) if ceilings else None, work_flops=work.flops or None
    )


def below_floor(student_ms: float, floor_ms: float) -> bool:
    """True when a measured time is physically impossible (so the measurement is suspect)."""
    return student_ms < FLOOR_SLACK * floor_ms


# --- evidence ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CounterRatio:
    """One case's counted metric for the student and the reference kernel."""

    case: Mapping[str, int | float]
    student: int
    reference: int

    @property
    def ratio(self) -> float:
        if self.reference == 0:
            return 1.0 if self.student == 0 else math.inf
        return self.student / self.reference


@dataclass(frozen=True)
class PerformanceEvidence:
    """What a performance item's score rests on, for the student and the TA report."""

    metric: str
    fraction: float  # of the item's points
    message: str  # the sentence a student reads
    ratio: float | None = None
    full_at: float | None = None
    zero_at: float | None = None
    cases: tuple[dict[str, Any], ...] = ()  # one JSON record per case (timings or counts)
    faster_than_reference: bool = False
    below_floor: bool = False  # a TA should look: the time beats the physics
    regrade: bool = False  # not measured here; rerun on a GPU

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_timings(timings: Sequence[Timing], full_at: float, zero_at: float) -> PerformanceEvidence:
    """Score an item with ``metric: time`` from its cases' interleaved timings.

    A kernel that computed a wrong answer on any timed launch (right only on its first
    call, results cached across calls) earns nothing, however fast it was.
    """
    wrong = [t.wrong for t in timings if t.wrong]
    if wrong:
        return PerformanceEvidence(
            metric=TIME,
            fraction=0.0,
            full_at=full_at,
            zero_at=zero_at,
            cases=tuple(_timing_record(t) for t in timings),
            message="not awarded: " + "; ".join(wrong),
        )
    ratio = combined_ratio([t.ratio for t in timings])
    suspect = [t for t in timings if t.floor_ms is not None and below_floor(t.student_ms, t.floor_ms)]
    fraction = score_fraction(ratio, full_at, zero_at)
    message = _ratio_sentence("time", ratio, full_at, zero_at)
    if suspect:
        message += (
            f"; {counted(len(suspect), 'case')} ran faster than the device's physical limit allows, "
            "so the measurement is held for a TA to review"
        )
    return PerformanceEvidence(
        metric=TIME,
        fraction=fraction,
        message=message,
        ratio=ratio,
        full_at=full_at,
        zero_at=zero_at,
        cases=tuple(_timing_record(t) for t in timings),
        faster_than_reference=ratio < 1.0,
        below_floor=bool(suspect),
    )


def score_counters(
    metric: str, counts: Sequence[CounterRatio], full_at: float, zero_at: float
) -> PerformanceEvidence:
    """Score an item whose metric is an emulator counter from per-case counts."""
    ratio = combined_ratio([c.ratio for c in counts])
    return PerformanceEvidence(
        metric=metric,
        fraction=score_fraction(ratio, full_at, zero_at),
        message=_ratio_sentence(metric, ratio, full_at, zero_at),
        ratio=ratio,
        full_at=full_at,
        zero_at=zero_at,
        cases=tuple(
            {"case": dict(c.case), "student": c.student, "reference": c.reference, "ratio": c.ratio}
            for c in counts
        ),
        faster_than_reference=ratio < 1.0,
    )


def counter_ratio(
    metric: str, case: Case, student_totals: Mapping[str, int], reference_totals: Mapping[str, int]
) -> CounterRatio:
    """Pair one case's counts (``LaunchResult.counters.totals``) of student and reference."""
    for who, totals in (("student", student_totals), ("reference", reference_totals)):
        if metric not in totals:
            raise KeyError(f"the emulator counted no {metric!r} for the {who} kernel")
    return CounterRatio(dict(case), int(student_totals[metric]), int(reference_totals[metric]))


def not_run(metric: str, reason: str = "needs a GPU") -> PerformanceEvidence:
    """An item that could not be measured here: no points yet, and marked for regrading."""
    return PerformanceEvidence(
        metric=metric,
        fraction=0.0,
        regrade=True,
        message=f"not run: {reason}; this item will be regraded on a GPU",
    )


# The statistical error, in points (one standard error), of a timed item's score when its cases'
# repeats end: under the hundredth Gradescope shows
SCORE_ERROR = 0.005


@dataclass(frozen=True)
class Scoring:
    """What a timing needs of its item's scoring: the ratios between which the score changes
    (``full_at``, ``zero_at``), and the relative standard error of a case's ratio at which the
    score is known to ``SCORE_ERROR`` points (its repeats may end there)."""

    between: tuple[float, float]
    spread: float

    @classmethod
    def of(cls, points: float, full_at: float, zero_at: float) -> Scoring:
        """Between full_at and zero_at the score falls by ``points * dlog(ratio) / log(zero_at /
        full_at)``: a ratio known to ``spread`` knows it to ``SCORE_ERROR`` points. The item's ratio
        is the geometric mean of its cases', whose errors shrink in it, so each case's is enough.
        Never finer than the timing's own finest (``PRECISE_SPREAD``), which no more repeats beat;
        an item worth no points needs no precision (its repeats end at ``min_repeats``)."""
        spread = SCORE_ERROR * math.log(zero_at / full_at) / points if points > 0 else math.inf
        return cls((full_at, zero_at), max(spread, PRECISE_SPREAD))


def timed_again(timings: Sequence[Timing], scoring: Scoring | None) -> set[int]:
    """The cases whose timing was ``decided`` (its repeats ended once the ratio lay outside the
    scored range, short of ``scoring.spread``) and must be timed again to that precision: none
    when every case's ratio lies on one side of the range, for then the item's score is decided
    (the geometric mean of ratios all below full_at is below it; all above zero_at, above it);
    otherwise a decided ratio's larger error would move the score of the mean it enters."""
    if scoring is None or any(t.wrong for t in timings):  # wrong: no points at all
        return set()
    low, high = scoring.between
    if all(t.ratio < low for t in timings) or all(t.ratio > high for t in timings):
        return set()
    return {k for k, t in enumerate(timings) if t.decided and t.ratio_spread >= scoring.spread}


def is_timed(metric: str | None) -> TypeGuard[str]:
    """Measured as device time (by a backend that ``measures_time``), not counted (an item's
    ``metric``: None, an item with no metric, is not timed)."""
    return metric == TIME


def _ratio_sentence(metric: str, ratio: float, full_at: float, zero_at: float) -> str:
    what = "time" if metric == TIME else f"{metric} (counted by the emulator)"
    bounds = f"full marks at <= {full_at:g}x, none at >= {zero_at:g}x"
    if not math.isfinite(ratio):
        return f"{what}: the reference kernel counts none, yours counts some ({bounds})"
    printed = f"{ratio:.3f}"
    if float(printed) < 1.0:  # as printed: 0.9997 reads 1.000x, which is not faster
        verdict = "full marks" if ratio <= full_at else f"not yet {full_at:g}x ({bounds})"
        return f"{what}: {printed}x the reference: faster than the reference, {verdict}"
    return f"{what}: {printed}x the reference ({bounds})"


def _timing_record(t: Timing) -> dict[str, Any]:
    record = {k: v for k, v in asdict(t).items() if k != "case"}
    return {"case": dict(t.case), **record, "ratio": t.ratio, "ratio_spread": t.ratio_spread}
