"""The runner's last stage: one completed launch against the float64 numpy reference.

A :class:`CaseOutcome` is one case run once on one backend: its error if the launch did not
complete, else how every output compares (:class:`OutputComparison`), which inputs the
kernel modified, its findings, counters and printed text. Checks score outcomes; they
never compare outputs themselves.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from autograder.contract import Counters, Finding, LaunchResult
from autograder.course.cases import Prepared, array_shape, arrays, reference_outputs, unwritten
from autograder.course.spec import Spec, evaluate
from autograder.feedback import LINE_BYTES, capped

MAX_REPORTED_STDOUT = 4000  # characters of a case's printf output in the TA report
MAX_RECORDED_FINDINGS = 50  # per case in the TA report (findings are collapsed per kind and line already)


@dataclass(frozen=True)
class OutputComparison:
    """One output array of one launch against the float64 reference."""

    name: str
    size: int
    wrong: int  # elements outside the tolerance (unwritten ones included)
    unwritten: int  # elements still holding the poison value (for floats: every NaN)
    max_abs_error: float | None  # over written, finite elements; None when there is none
    max_rel_error: float | None
    first_wrong: str | None = None  # e.g. "c[998]" or "C[3, 7]"
    got: float | None = None  # at first_wrong
    expected: float | None = None
    nan: int = 0  # elements holding NaN: never written, or computed as NaN
    infinite: int = 0  # written elements off by an infinite error (left out of the max errors)

    @property
    def ok(self) -> bool:
        return self.wrong == 0


@dataclass(frozen=True)
class CaseOutcome:
    """One case run once on one backend: what happened and how the outputs compare."""

    group: str
    index: int
    params: dict[str, int | float]  # the case's parameters
    seed: int
    backend: str
    error: str | None = None  # the launch did not complete (compile, crash, timeout, unsupported)
    grader_fault: bool = False  # the error is the grader's, not the submission's
    outputs: tuple[OutputComparison, ...] = ()
    inputs_modified: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    counters: Counters | None = None
    elapsed_ms: float | None = None
    stdout: str = ""  # what the kernel printed (printf)
    wall_s: float | None = None  # seconds the launch and its comparison took on this machine

    @property
    def correct(self) -> bool:
        unfinished = any(f.check == "correctness" for f in self.findings)
        return (
            self.error is None
            and not unfinished
            and not self.inputs_modified
            and all(o.ok for o in self.outputs)
        )

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items()) or f"case {self.index}"


def judged(outcome: CaseOutcome, spec: Spec, prepared: Prepared, result: LaunchResult) -> CaseOutcome:
    """``outcome`` with a completed launch's result compared against the numpy reference."""
    outputs, modified = compare_outputs(spec, prepared, result)
    return replace(
        outcome,
        outputs=outputs,
        inputs_modified=modified,
        findings=tuple(result.findings),
        counters=result.counters,
        elapsed_ms=result.elapsed_ms,
        stdout=result.stdout,
    )


def compare_outputs(
    spec: Spec, prepared: Prepared, result: LaunchResult
) -> tuple[tuple[OutputComparison, ...], tuple[str, ...]]:
    """Every output against the spec's float64 reference, and the inputs the kernel modified."""
    case = prepared.ref.case
    expected = (
        prepared.expected if prepared.expected is not None else reference_outputs(spec, case, prepared.inputs)
    )
    rtol = float(evaluate(spec.tolerance.rtol, case))
    atol = float(evaluate(spec.tolerance.atol, case))
    outputs = tuple(
        compare_output(
            array.name, result.outputs[array.name], expected[array.name], array_shape(array, case), rtol, atol
        )
        for array in arrays(spec)
        if array.name in expected
    )
    modified = tuple(
        name
        for name, before in prepared.inputs.items()
        if name not in expected and not _unchanged(result.outputs[name], before)
    )
    return outputs, modified


def _unchanged(after: np.ndarray, before: np.ndarray) -> bool:
    """Whether a launch left an input as it was (``np.array_equal``, NaN equal to NaN for floats).
    Equal elements settle it for an input without NaN, nearly every one, in 2 passes over it
    against ``array_equal``'s 9 and 2 copies with ``equal_nan`` (0.2 ms against 4.1 for a million
    float32s on the 2-core VM), which answers the rest."""
    if after.shape == before.shape and bool((after == before).all()):
        return True
    return np.array_equal(after, before, equal_nan=before.dtype.kind in "fc")


def compare_output(
    name: str, got_raw: np.ndarray, expected: np.ndarray, shape: tuple[int, ...], rtol: float, atol: float
) -> OutputComparison:
    """Every element against the reference, in slices of ``CHUNK`` (on threads for a large output).

    Slices give the same counts, maxima and first wrong element as one pass over the whole
    array, with temporaries that stay in the cache: a 2**26-element output took 2.8 s in one
    pass on the H200's host."""
    if got_raw.dtype.kind in "iub":  # integers are exact: rtol would pass 1_000_001 for a million
        rtol = atol = 0.0
    got_raw, expected = got_raw.reshape(-1), expected.reshape(-1)
    starts = range(0, max(got_raw.size, 1), CHUNK)
    slices = [(got_raw[i : i + CHUNK], expected[i : i + CHUNK], rtol, atol) for i in starts]
    if len(slices) < 4:
        parts = [_compare_slice(*s) for s in slices]
    else:
        with ThreadPoolExecutor(min(COMPARE_THREADS, len(slices))) as pool:  # numpy releases the GIL
            parts = list(pool.map(lambda s: _compare_slice(*s), slices))
    # a slice has both maxima or neither (``_compare_slice``)
    maxima = [(p.max_abs, p.max_rel) for p in parts if p.max_abs is not None and p.max_rel is not None]
    comparison = OutputComparison(
        name,
        got_raw.size,
        sum(p.wrong for p in parts),
        sum(p.unwritten for p in parts),
        max(m[0] for m in maxima) if maxima else None,
        max(m[1] for m in maxima) if maxima else None,
        nan=sum(p.nan for p in parts),
        infinite=sum(p.infinite for p in parts),
    )
    if not comparison.wrong:
        return comparison
    first = next(start + p.first_wrong for start, p in zip(starts, parts, strict=True) if p.wrong)
    where = (
        np.unravel_index(first, shape) if math.prod(shape) == got_raw.size and len(shape) > 1 else (first,)
    )
    return replace(
        comparison,
        first_wrong=f"{name}[{', '.join(map(str, where))}]",
        got=float(np.float64(got_raw[first])),
        expected=float(expected[first]),
    )


CHUNK = 1 << 18  # elements compared at a time: 2 MiB of float64 per temporary
COMPARE_THREADS = min(8, os.cpu_count() or 1)


@dataclass(frozen=True)
class _Slice:
    """:func:`compare_output`'s figures over one slice; ``first_wrong`` is an index into it."""

    wrong: int
    unwritten: int
    max_abs: float | None
    max_rel: float | None
    nan: int
    infinite: int
    first_wrong: int


def _compare_slice(got_raw: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> _Slice:
    got: np.ndarray = got_raw.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf
        error = np.abs(got - expected)
    return _all_within(got_raw, expected, error, rtol, atol) or _checked(
        got_raw, got, expected, error, rtol, atol
    )


def _all_within(
    got_raw: np.ndarray, expected: np.ndarray, error: np.ndarray, rtol: float, atol: float
) -> _Slice | None:
    """:func:`_checked`'s figures where every element is a finite float within the tolerance (a
    correct kernel's output: most of a grading's comparisons) in 9 passes over the slice and 3
    temporaries, against its 31 and about 20 (a regrade of the course compares 4.5 M elements:
    0.13 s of the grader's CPU became 0.07); None otherwise. A finite error (its maximum is not
    NaN or infinite) is a finite value against a finite reference: nothing NaN, so nothing
    unwritten (a float output's poison is NaN), nothing infinite."""
    if got_raw.dtype.kind != "f" or not error.size:
        return None
    largest = error.max()  # NaN or infinite where one element is
    if not np.isfinite(largest):
        return None
    magnitude = np.abs(expected)
    bound = magnitude * rtol
    bound += atol
    if not (error <= bound).all():
        return None
    np.maximum(magnitude, 1e-30, out=magnitude)
    relative = np.divide(error, magnitude, out=magnitude)
    return _Slice(0, 0, float(largest), float(relative.max()), 0, 0, 0)


def _checked(
    got_raw: np.ndarray, got: np.ndarray, expected: np.ndarray, error: np.ndarray, rtol: float, atol: float
) -> _Slice:
    """The slice's figures element by element: ``got`` is ``got_raw`` as float64, ``error`` its
    absolute difference from ``expected``."""
    never = unwritten(got_raw.dtype, got_raw)
    # an infinite reference value is matched exactly: rtol * inf would let any value pass
    within = np.where(np.isfinite(expected), error <= atol + rtol * np.abs(expected), got == expected)
    wrong = never | ~within
    written = ~never & np.isfinite(error)
    max_abs = max_rel = None
    if written.any():
        max_abs = float(error[written].max())
        max_rel = float((error[written] / np.maximum(np.abs(expected[written]), 1e-30)).max())
    return _Slice(
        int(wrong.sum()),
        int(never.sum()),
        max_abs,
        max_rel,
        int(np.isnan(got).sum()),
        int((~never & np.isinf(error)).sum()),
        int(np.argmax(wrong)) if wrong.size else 0,
    )


def outcome_record(o: CaseOutcome) -> dict[str, Any]:
    """Everything about one case for the TA report (JSON-ready)."""
    return {
        "group": o.group,
        "index": o.index,
        "label": o.label(),
        "params": o.params,
        "seed": o.seed,
        "backend": o.backend,
        "correct": o.correct,
        "error": o.error,
        "grader_fault": o.grader_fault,
        "outputs": [asdict(c) for c in o.outputs],
        "inputs_modified": list(o.inputs_modified),
        "findings": [record(f) for f in o.findings[:MAX_RECORDED_FINDINGS]],
        "elapsed_ms": o.elapsed_ms,
        "wall_s": o.wall_s,
        "counters": dict(o.counters.totals) if o.counters else None,
        "stdout": o.stdout[:MAX_REPORTED_STDOUT],
    }


def record(finding: Finding) -> dict[str, Any]:
    """One finding for the TA report, its message bounded."""
    return {**asdict(finding), "message": capped(finding.message, LINE_BYTES)}
