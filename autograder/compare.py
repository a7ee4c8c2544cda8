"""The runner's last stage: one completed launch against the float64 numpy reference.

A :class:`CaseOutcome` is one case run once on one backend: its error if the launch did not
complete, else how every output compares (:class:`OutputComparison`), which inputs the
kernel modified, its findings, counters and printed text. Checks score outcomes; they
never compare outputs themselves.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from autograder.backends.base import Counters, Finding, LaunchResult
from autograder.cases import Prepared, array_shape, arrays, reference_outputs, unwritten
from autograder.feedback import LINE_BYTES, capped
from autograder.spec import Spec, evaluate

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
    params: dict
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
    expected = reference_outputs(spec, case, prepared.inputs)
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
        if name not in expected
        and not np.array_equal(result.outputs[name], before, equal_nan=before.dtype.kind in "fc")
    )
    return outputs, modified


def compare_output(
    name: str, got_raw: np.ndarray, expected: np.ndarray, shape: tuple[int, ...], rtol: float, atol: float
) -> OutputComparison:
    if got_raw.dtype.kind in "iub":  # integers are exact: rtol would pass 1_000_001 for a million
        rtol = atol = 0.0
    got = got_raw.astype(np.float64)
    never = unwritten(got_raw.dtype, got_raw)
    with np.errstate(invalid="ignore"):  # inf - inf
        error = np.abs(got - expected)
    # an infinite reference value is matched exactly: rtol * inf would let any value pass
    within = np.where(np.isfinite(expected), error <= atol + rtol * np.abs(expected), got == expected)
    wrong = never | ~within
    written = ~never & np.isfinite(error)
    max_abs = max_rel = None
    if written.any():
        max_abs = float(error[written].max())
        max_rel = float((error[written] / np.maximum(np.abs(expected[written]), 1e-30)).max())
    comparison = OutputComparison(
        name,
        got.size,
        int(wrong.sum()),
        int(never.sum()),
        max_abs,
        max_rel,
        nan=int(np.isnan(got).sum()),
        infinite=int((~never & np.isinf(error)).sum()),
    )
    if not wrong.any():
        return comparison
    first = int(np.argmax(wrong))
    where = np.unravel_index(first, shape) if math.prod(shape) == got.size and len(shape) > 1 else (first,)
    return replace(
        comparison,
        first_wrong=f"{name}[{', '.join(map(str, where))}]",
        got=float(got[first]),
        expected=float(expected[first]),
    )


def outcome_record(o: CaseOutcome) -> dict:
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


def record(finding: Finding) -> dict:
    """One finding for the TA report, its message bounded."""
    return {**asdict(finding), "message": capped(finding.message, LINE_BYTES)}
