"""The checks: one function per check kind, from case outcomes to a scored rubric item.

A check asks a :class:`Runs` for the outcomes it needs (``grading``: the grading backend;
``safety``: the emulator, which sees every out-of-bounds access and barrier defect a GPU
hides; ``reference``: the instructor's kernel on the emulator) and never runs anything
itself. Every check except correctness is gated: it scores 0 unless the kernel computes
the right answer on the very cases the check runs, so an empty stub collects nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from autograder import performance
from autograder.backends.base import BackendError, Counters, Finding, LaunchResult
from autograder.cases import Prepared, array_shape, arrays, reference_outputs, unwritten
from autograder.rubric import Item
from autograder.spec import Case, Spec, evaluate

MAX_FINDINGS_SHOWN = 8
MAX_PRINTED_LINES = 5  # of a kernel's printf output, per case, in the student's feedback
MAX_REPORTED_STDOUT = 4000  # characters of it per case in the TA report


@dataclass(frozen=True)
class OutputComparison:
    """One output array of one launch against the float64 reference."""

    name: str
    size: int
    wrong: int  # elements outside the tolerance (unwritten ones included)
    unwritten: int  # elements still holding the poison value
    max_abs_error: float | None  # over written elements; None when none was written
    max_rel_error: float | None
    first_wrong: str | None = None  # e.g. "c[998]" or "C[3, 7]"
    got: float | None = None  # at first_wrong
    expected: float | None = None

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

    @property
    def correct(self) -> bool:
        unfinished = any(f.check == "correctness" for f in self.findings)
        return self.error is None and not unfinished and not self.inputs_modified and all(
            o.ok for o in self.outputs
        )

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items()) or f"case {self.index}"


def compare(spec: Spec, case: Case, prepared: Prepared, result: LaunchResult) -> dict:
    """Evidence fields of a :class:`CaseOutcome` for a completed launch."""
    expected = reference_outputs(spec, case, prepared.inputs)
    rtol = float(evaluate(spec.tolerance.rtol, case))
    atol = float(evaluate(spec.tolerance.atol, case))
    outputs = []
    for array in arrays(spec):
        if array.name in expected:
            got = result.outputs[array.name]
            outputs.append(
                compare_output(array.name, got, expected[array.name], array_shape(array, case), rtol, atol)
            )
    modified = tuple(
        name for name, before in prepared.inputs.items()
        if name not in expected
        and not np.array_equal(result.outputs[name], before, equal_nan=before.dtype.kind in "fc")
    )
    return {"outputs": tuple(outputs), "inputs_modified": modified}


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
    comparison = OutputComparison(name, got.size, int(wrong.sum()), int(never.sum()), max_abs, max_rel)
    if not wrong.any():
        return comparison
    first = int(np.argmax(wrong))
    where = np.unravel_index(first, shape) if math.prod(shape) == got.size and len(shape) > 1 else (first,)
    return OutputComparison(
        **{**comparison.__dict__, "first_wrong": f"{name}[{', '.join(map(str, where))}]",
           "got": float(got[first]), "expected": float(expected[first])}
    )


@dataclass(frozen=True)
class ItemResult:
    """A scored rubric item: what the student reads and what the TA reads."""

    item: Item
    score: float
    output: str  # for the student (results.json)
    evidence: dict = field(default_factory=dict)  # for the TA report (seeds included)
    regrade: bool = False  # not graded, or hit by a grader fault: a person should look
    not_run: str | None = None  # why the check could not run here (e.g. "needs a GPU")

    @property
    def passed(self) -> bool:
        return self.score >= self.item.points and not self.regrade


class Runs(Protocol):
    """What a check may ask of the pipeline."""

    def outcomes(self, role: str, group: str) -> list[CaseOutcome]:
        """Outcomes of every case of ``group``; role is ``grading``, ``safety`` or ``reference``."""

    def backend_name(self, role: str) -> str: ...

    def timings(self, group: str) -> list[performance.Timing]:
        """Student against reference, interleaved on the grading GPU, for every case of ``group``."""


def correctness(item: Item, runs: Runs) -> ItemResult:
    outcomes = runs.outcomes("grading", item.cases)
    passed = sum(o.correct for o in outcomes)
    score = item.points * passed / len(outcomes) if outcomes else 0.0
    lines = [f"{passed} of {len(outcomes)} cases correct"] + [describe(o) for o in outcomes]
    return _result(item, score, lines, outcomes)


def bounds(item: Item, runs: Runs) -> ItemResult:
    return _findings_check(item, runs)


def barriers(item: Item, runs: Runs) -> ItemResult:
    return _findings_check(item, runs)


def _findings_check(item: Item, runs: Runs) -> ItemResult:
    """Full points when every case is correct and no launch reports a finding of this check.

    Runs on the emulator; when the grading backend differs (the GPU), its own findings
    (canary zones) on the same cases count too.
    """
    outcomes = runs.outcomes("safety", item.cases)
    if runs.backend_name("grading") != runs.backend_name("safety"):
        outcomes = outcomes + runs.outcomes("grading", item.cases)
    findings = [f for o in outcomes for f in o.findings if f.check == item.check]
    gate = _gate(item, outcomes, findings)
    if gate:
        return gate
    if not findings:
        return _result(item, item.points, [f"no {item.check} finding on {_cases(outcomes)}"], outcomes)
    return _result(item, 0.0, [f"{len(findings)} {item.check} finding(s):", *_messages(findings)], outcomes)


def traffic(item: Item, runs: Runs) -> ItemResult:
    """A counted metric, student over reference kernel on the same cases (emulator)."""
    outcomes = runs.outcomes("safety", item.cases)
    gate = _gate(item, outcomes)
    if gate:
        return gate
    reference = runs.outcomes("reference", item.cases)
    try:
        counts = [
            performance.counter_ratio(item.metric, s.params, _totals(s), _totals(r))
            for s, r in zip(outcomes, reference, strict=True)
        ]
    except LookupError as e:
        return _result(item, 0.0, [f"grader problem, flagged for regrading: {e}"], outcomes, regrade=True)
    evidence = performance.score_counters(item.metric, counts, item.full_at, item.zero_at)
    result = _result(item, item.points * evidence.fraction, [evidence.message], outcomes)
    result.evidence.update(ratio=evidence.to_dict())
    return result


def performance_check(item: Item, runs: Runs) -> ItemResult:
    """Speed against the reference (``performance.py``): GPU time, or an emulator counter.

    ``metric: time`` needs the GPU: without one the item is not run and is flagged for
    regrading on a GPU, never scored 0 silently. A counter metric scores like ``traffic``.
    A time under the device's physical floor is scored but flagged for a TA.
    """
    if not performance.needs_gpu(item.metric):
        return traffic(item, runs)
    if runs.backend_name("grading") != "gpu":
        evidence = performance.not_run(item.metric, "needs a GPU")
        return ItemResult(item, 0.0, evidence.message, {"ratio": evidence.to_dict()}, regrade=True,
                          not_run="needs a GPU")
    outcomes = runs.outcomes("grading", item.cases)
    gate = _gate(item, outcomes)
    if gate:
        return gate
    try:
        evidence = performance.score_timings(runs.timings(item.cases), item.full_at, item.zero_at)
    except BackendError as e:
        return _result(item, 0.0, [f"timing failed: {e}"], outcomes)
    result = _result(item, item.points * evidence.fraction, [evidence.message], outcomes,
                     regrade=evidence.below_floor)
    result.evidence.update(ratio=evidence.to_dict())
    return result


CHECKS: dict[str, Callable[[Item, Runs], ItemResult]] = {
    "correctness": correctness,
    "bounds": bounds,
    "barriers": barriers,
    "traffic": traffic,
    "performance": performance_check,
}


def _gate(item: Item, outcomes: list[CaseOutcome], findings: list[Finding] = ()) -> ItemResult | None:
    """0 points unless every case is correct; the findings of this check are shown all the same."""
    wrong = [o for o in outcomes if not o.correct]
    if not wrong:
        return None
    lines = [
        f"not awarded: the kernel does not compute the right answer on the {item.cases} cases "
        f"this check runs ({len(wrong)} of {len(outcomes)} wrong)",
        *(describe(o) for o in wrong),
    ]
    if findings:
        lines += [f"{len(findings)} {item.check} finding(s) as well:", *_messages(findings)]
    return _result(item, 0.0, lines, outcomes)


def _result(item: Item, score: float, lines: list[str], outcomes: list[CaseOutcome], regrade=False):
    if any(o.grader_fault for o in outcomes):
        regrade = True
        lines = [*lines, "a grader fault hit this item: it is flagged for regrading"]
    evidence = {"cases": [case_evidence(o) for o in outcomes]}
    return ItemResult(item, round(score, 4), "\n".join(lines), evidence, regrade)


def _totals(outcome: CaseOutcome) -> dict[str, int]:
    if outcome.error or outcome.counters is None:
        raise LookupError(
            f"no counters for case {outcome.label()} on {outcome.backend}: {outcome.error or 'none reported'}"
        )
    return outcome.counters.totals


def _cases(outcomes: list[CaseOutcome]) -> str:
    backends = sorted({o.backend for o in outcomes})
    return f"{len({(o.group, o.index) for o in outcomes})} case(s) on {' and '.join(backends)}"


def _messages(findings: list[Finding]) -> list[str]:
    lines = [f"  {f.message}" + (f" (and {f.others} other threads)" if f.others else "") for f in findings]
    if len(lines) > MAX_FINDINGS_SHOWN:
        lines = [*lines[:MAX_FINDINGS_SHOWN], f"  ... and {len(lines) - MAX_FINDINGS_SHOWN} more"]
    return lines


def describe(outcome: CaseOutcome) -> str:
    """One case in a few lines a student can act on (no seed)."""
    return _describe_launch(outcome) + _printed(outcome.stdout)


def _describe_launch(outcome: CaseOutcome) -> str:
    head = f"- {outcome.label()} [{outcome.backend}]: "
    if outcome.error:
        return head + outcome.error
    problems = [_describe_output(o) for o in outcome.outputs if not o.ok]
    problems += [f"input {name} was modified by the kernel" for name in outcome.inputs_modified]
    problems += _messages([f for f in outcome.findings if f.check == "correctness"])
    if not problems:
        worst = max((o.max_abs_error or 0.0 for o in outcome.outputs), default=0.0)
        return head + f"correct (max abs error {worst:.3g})"
    return head + "; ".join(problems)


def _printed(stdout: str) -> str:
    lines = stdout.splitlines()
    if not lines:
        return ""
    shown = [f"\n    | {line}" for line in lines[:MAX_PRINTED_LINES]]
    hidden = len(lines) - MAX_PRINTED_LINES
    if hidden > 0:
        shown.append(f"\n    | ... {hidden} more lines")
    return "\n  your kernel printed:" + "".join(shown)


def _describe_output(o: OutputComparison) -> str:
    text = f"{o.wrong} of {o.size} values of {o.name} wrong, first {o.first_wrong}: "
    text += f"got {o.got:.7g}, expected {o.expected:.7g}"
    if o.unwritten:
        text += f"; {o.unwritten} never written"
    if o.max_abs_error is not None:
        text += f"; max abs error {o.max_abs_error:.3g}, max rel error {o.max_rel_error:.3g}"
    return text


def case_evidence(o: CaseOutcome) -> dict:
    """Everything about one case for the TA report (JSON-ready)."""
    return {
        "group": o.group, "index": o.index, "params": o.params, "seed": o.seed, "backend": o.backend,
        "correct": o.correct, "error": o.error, "grader_fault": o.grader_fault,
        "outputs": [c.__dict__ for c in o.outputs], "inputs_modified": list(o.inputs_modified),
        "findings": [f.__dict__ for f in o.findings], "elapsed_ms": o.elapsed_ms,
        "counters": dict(o.counters.totals) if o.counters else None,
        "stdout": o.stdout[:MAX_REPORTED_STDOUT],
    }
