"""The checks: one scorer per check kind, from case outcomes to a scored rubric item.

A check asks a :class:`Runs` for the outcomes it needs (``grading``: the grading backend;
``safety``: a backend that sees every out-of-bounds access and barrier defect a GPU hides;
``reference``: the instructor's kernel on that backend) and for timings, and never runs or
compares anything itself: it only scores. It asks what a backend can do
(:class:`Capabilities`), never which backend it is. Every check except correctness is
gated: it scores 0 unless the kernel computes the right answer on the very cases the check
runs, so an empty stub collects nothing. A timed performance item is gated on the
assignment's correctness items too, first, on every backend alike: a kernel wrong there scores
0 with that reason, and is never flagged for a GPU regrade it could not pass. A bounds or
barriers finding counts wherever it was seen: on any launch of the student's kernel that the
grading made, in any case group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Protocol

from autograder.contract import BackendError, Capabilities, Finding, Timing, Unsupported
from autograder.course.rubric import Item
from autograder.course.vocabulary import CHECKS, SPILLS
from autograder.device import Occupancy
from autograder.feedback import LINE_BYTES, capped, counted
from autograder.grading import performance
from autograder.grading.compare import CaseOutcome, OutputComparison
from autograder.grading.evidence import CaseRecord, Evidence
from autograder.grading.glossary import explained
from autograder.grading.grade import ItemResult
from autograder.grading.ledger import graded_totals
from autograder.grading.resources import Resources

MAX_FINDINGS_SHOWN = 8
MAX_CASES_NAMED = 6  # per collapsed finding
MAX_PRINTED_LINES = 5  # of a kernel's printf output, per case, in the student's feedback
# Findings whose read got no defined value, so that outputs computed from it are wrong.
UNDEFINED_READS = ("out_of_bounds_read", "uninitialized_shared_read", "uninitialized_global_read")


class Runs(Protocol):
    """What a check may ask of the pipeline."""

    def outcomes(self, role: str, group: str) -> list[CaseOutcome]:
        """Outcomes of every case of ``group``; role is ``grading``, ``safety`` or ``reference``."""

    def capabilities(self, role: str) -> Capabilities:
        """What the backend playing ``role`` can do."""

    def same_backend(self, role: str, other: str) -> bool:
        """Whether two roles are played by the same backend."""

    def timings(self, group: str, scoring: performance.Scoring | None = None) -> list[Timing]:
        """Student against reference, interleaved on the grading backend, for every case of ``group``;
        with ``scoring``, each timed to the precision its item's score needs."""

    def why_untimed(self) -> str | None:
        """Why ``timings`` cannot run here (no GPU, no reference kernel); None when they can."""

    def resources(self, group: str) -> list[tuple[dict[str, int | float], Resources, Occupancy]]:
        """Each case of ``group``: its parameters, what ptxas gives the student's kernel for
        sm_90 with the case's defines, and the occupancy of the case's launch."""

    def student_outcomes(self) -> list[CaseOutcome]:
        """Every launch of the student's kernel the grading makes (``student_launches``), each once."""

    def correctness_outcomes(self) -> list[CaseOutcome]:
        """The cases of the assignment's correctness items on the grading backend, each group once."""


# The roles each check runs the student's kernel on (``Runs.outcomes``); a timed performance
# item's launches, on a GPU only, are left out of ``student_launches``.
STUDENT_ROLES = {
    "correctness": ("grading",),
    "bounds": ("safety", "grading"),
    "barriers": ("safety", "grading"),
    "traffic": ("safety",),
    "performance": ("safety",),
    "resources": ("safety",),
}


def is_timed_item(item: Item) -> bool:
    """A performance item timed on the device (``metric: time``): the only kind a GPU must grade."""
    return item.check == "performance" and performance.is_timed(item.metric)


def student_launches(items: tuple[Item, ...]) -> list[tuple[str, str]]:
    """The (role, case group) pairs on which ``items`` run the student's kernel, in rubric order."""
    pairs = (
        (role, item.cases) for item in items if not is_timed_item(item) for role in STUDENT_ROLES[item.check]
    )
    return list(dict.fromkeys(pairs))


def correctness(item: Item, runs: Runs) -> ItemResult:
    outcomes = runs.outcomes("grading", item.cases)
    passed = sum(o.correct for o in outcomes)
    score = item.points * passed / len(outcomes) if outcomes else 0.0
    lines = [f"{passed} of {counted(len(outcomes), 'case')} correct"] + [describe(o) for o in outcomes]
    return _result(item, score, lines, outcomes)


def bounds(item: Item, runs: Runs) -> ItemResult:
    return _findings_check(item, runs)


def barriers(item: Item, runs: Runs) -> ItemResult:
    return _findings_check(item, runs)


def _findings_check(item: Item, runs: Runs) -> ItemResult:
    """Full points when every case of the item is correct and no launch of the student's kernel
    in the whole grading reports a finding of this check.

    The item's cases run on the safety backend; when the grading backend is another one (the
    GPU), its own findings (canary zones) count too. A finding on a case of another group (a
    correctness case, a traffic case) counts as one on the item's: a kernel guarded only on the
    sizes the handout lists for this group loses the points all the same.
    """
    outcomes = runs.outcomes("safety", item.cases)
    if not runs.same_backend("grading", "safety"):
        outcomes = outcomes + runs.outcomes("grading", item.cases)
    shown = {id(o) for o in outcomes}
    everywhere = outcomes + [o for o in runs.student_outcomes() if id(o) not in shown]  # the item's first
    found = [(o, f) for o in everywhere for f in o.findings if f.check == item.check]
    seen = list({id(o): o for o, _ in found if id(o) not in shown}.values())
    gate = _gate(item, outcomes, found, seen)
    if gate:
        return gate
    if not found:
        return _result(item, item.points, [f"no {item.check} finding on {_cases(everywhere)}"], outcomes)
    return _result(item, 0.0, [f"{_found(item.check, found)}:", *_collapsed(found)], outcomes + seen)


def traffic(item: Item, runs: Runs) -> ItemResult:
    """A counted metric, student over reference kernel on the same cases (emulator). Values are
    bytes over the assignment's element size (``ledger.graded_totals``): the same data read as
    other types (``ld.v2.u64`` for ``ld.v4.f32``) is the same traffic."""
    outcomes = runs.outcomes("safety", item.cases)
    gate = _gate(item, outcomes)
    if gate:
        return gate
    reference = runs.outcomes("reference", item.cases)
    spec = getattr(runs, "spec", None)  # the pipeline's (with its drawn cases); a test's runs may have none
    metric, full_at, zero_at = _ratio_rule(item)
    try:
        counts = [
            performance.counter_ratio(
                metric, s.params, graded_totals(_totals(s), spec), graded_totals(_totals(r), spec)
            )
            for s, r in zip(outcomes, reference, strict=True)
        ]
    except LookupError as e:
        return _result(item, 0.0, [f"grader problem, flagged for regrading: {e}"], outcomes, regrade=True)
    evidence = performance.score_counters(metric, counts, full_at, zero_at)
    return _result(item, item.points * evidence.fraction, [evidence.message], outcomes, ratio=evidence)


def performance_check(item: Item, runs: Runs) -> ItemResult:
    """Speed against the reference (``performance.py``): device time, or a counted metric.

    ``metric: time`` is scored 0 first when the correctness items found the kernel wrong (no
    speed is measured, nothing is flagged); else it needs a grading backend that
    ``measures_time`` (a GPU): without one the item is not run and is flagged for regrading on
    a GPU, never scored 0 silently. A counter metric scores like ``traffic``. A time under the
    device's physical floor is scored but flagged for a TA.
    """
    if not performance.is_timed(item.metric):
        return traffic(item, runs)
    wrong = _wrong_results(runs.correctness_outcomes())
    if wrong:
        return _result(item, 0.0, [_unmeasured(wrong)], wrong)
    why = runs.why_untimed()
    if why:
        evidence = performance.not_run(item.metric, why)
        return ItemResult(item, 0.0, evidence.message, Evidence(ratio=evidence), regrade=True, not_run=why)
    outcomes = runs.outcomes("grading", item.cases)
    gate = _gate(item, outcomes)
    if gate:
        return gate
    _, full_at, zero_at = _ratio_rule(item)
    try:
        timings = runs.timings(item.cases, performance.Scoring.of(item.points, full_at, zero_at))
        evidence = performance.score_timings(timings, full_at, zero_at)
    except Unsupported as e:  # what the backend cannot run is the grader's limit: a person should look
        return _result(item, 0.0, [f"timing failed: {e}"], outcomes, regrade=True)
    except BackendError as e:  # the kernel's own crash or hang at the timed size
        return _result(item, 0.0, [f"timing failed: {e}"], outcomes)
    return _result(
        item,
        item.points * evidence.fraction,
        [evidence.message],
        outcomes,
        regrade=evidence.below_floor,
        ratio=evidence,
    )


def _ratio_rule(item: Item) -> tuple[str, float, float]:
    """A ratio item's ``metric``, ``full_at`` and ``zero_at``, which rubric.py requires of every
    traffic and performance item."""
    if item.metric is None or item.full_at is None or item.zero_at is None:
        raise ValueError(f"the {item.check} item {item.name!r} lacks its metric, full_at or zero_at")
    return item.metric, item.full_at, item.zero_at


def _wrong_results(outcomes: list[CaseOutcome]) -> list[CaseOutcome]:
    """The correctness cases the kernel got wrong; a case the grader failed (flagged for a TA)
    proves nothing about the kernel."""
    return [o for o in outcomes if not o.correct and not o.grader_fault]


def _unmeasured(wrong: list[CaseOutcome]) -> str:
    """Why a timed item scores 0 on every backend, with no GPU regrade: a kernel whose results
    are wrong can never earn speed points, so timing it (or sending it to a TA) is pointless."""
    first = wrong[0]
    more = f" and {counted(len(wrong) - 1, 'more case')}" if len(wrong) > 1 else ""
    return (
        f"not awarded: your kernel is not correct on {first.group} case {first.label()}{more} "
        "(see the correctness items), so its speed is not measured; make it correct first"
    )


def resources(item: Item, runs: Runs) -> ItemResult:
    """What the compiler gives the kernel (``resources.py``, sm_90, no GPU needed): no spills,
    or an occupancy of at least ``at_least`` of an SM's warps, on every case of the group."""
    outcomes = runs.outcomes("safety", item.cases)
    gate = _gate(item, outcomes)
    if gate:
        return gate
    try:
        figures = runs.resources(item.cases)
    except BackendError as e:
        return _result(item, 0.0, [f"ptxas could not compile the kernel for sm_90: {e}"], outcomes)
    lines = [_resource_line(item, case, found, held) for case, found, held in figures]
    met = all(_meets(item, found, held) for _, found, held in figures)
    result = _result(item, item.points if met else 0.0, lines, outcomes)
    recorded = [
        {"case": case, **asdict(found), "blocks_per_sm": held.blocks_per_sm, "occupancy": held.fraction}
        for case, found, held in figures
    ]
    detail = {**result.evidence.detail, "resources": recorded}
    return replace(result, evidence=replace(result.evidence, detail=detail))


def _meets(item: Item, found: Resources, held: Occupancy) -> bool:
    if item.metric == SPILLS:
        return found.spill_stores == found.spill_loads == 0
    return held.fraction >= _at_least(item)


def _at_least(item: Item) -> float:
    """An occupancy item's least fraction of warps, which rubric.py requires of every one."""
    if item.at_least is None:
        raise ValueError(f"the {item.metric} item {item.name!r} has no at_least")
    return item.at_least


def _resource_line(item: Item, case: Mapping[str, int | float], found: Resources, held: Occupancy) -> str:
    where = ", ".join(f"{k}={v}" for k, v in case.items())
    if item.metric == SPILLS:
        if _meets(item, found, held):
            return f"{where}: no spills ({counted(found.registers, 'register')} a thread)"
        return (
            f"{where}: the compiler spilled {found.spill_stores:,} bytes a thread to local memory and "
            f"reads {found.spill_loads:,} back ({counted(found.registers, 'register')} a thread): keep "
            "fewer values live at once, or index arrays with constants so they stay in registers"
        )
    verdict = "at least" if _meets(item, found, held) else "below"
    return (
        f"{where}: occupancy {100 * held.fraction:.0f} % ({counted(held.blocks_per_sm, 'block')} of "
        f"{counted(held.warps_per_block, 'warp')} an SM, limited by {' and '.join(held.limiting)}), "
        f"{verdict} the {100 * _at_least(item):.0f} % asked"
    )


SCORERS: dict[str, Callable[[Item, Runs], ItemResult]] = dict(
    zip(CHECKS, (correctness, bounds, barriers, traffic, performance_check, resources), strict=True)
)


def _gate(
    item: Item,
    outcomes: list[CaseOutcome],
    found: Sequence[tuple[CaseOutcome, Finding]] = (),
    seen: Sequence[CaseOutcome] = (),
) -> ItemResult | None:
    """0 points unless every case is correct; the findings of this check (and the cases of other
    groups they were ``seen`` on) are shown all the same."""
    wrong = [o for o in outcomes if not o.correct]
    if not wrong:
        return None
    lines = [
        f"not awarded: the kernel does not compute the right answer on the {item.cases} cases "
        f"this check runs ({len(wrong)} of {len(outcomes)} wrong)",
        *(describe(o) for o in wrong),
    ]
    if found:
        lines += [f"{_found(item.check, found)} as well:", *_collapsed(found)]
    return _result(item, 0.0, lines, [*outcomes, *seen])


def _result(
    item: Item,
    score: float,
    lines: list[str],
    outcomes: list[CaseOutcome],
    regrade: bool = False,
    ratio: performance.PerformanceEvidence | None = None,
) -> ItemResult:
    if any(o.grader_fault for o in outcomes):
        regrade = True
        lines = [*lines, "a grader fault hit this item: it is flagged for regrading"]
    evidence = Evidence(cases=tuple(map(CaseRecord.of, outcomes)), ratio=ratio)
    return ItemResult(item, round(score, 4), explained("\n".join(lines)), evidence, regrade)


def _totals(outcome: CaseOutcome) -> dict[str, int]:
    if outcome.error or outcome.counters is None:
        raise LookupError(
            f"no counters for case {outcome.label()} on {outcome.backend}: {outcome.error or 'none reported'}"
        )
    return outcome.counters.totals


def _cases(outcomes: list[CaseOutcome]) -> str:
    backends = sorted({o.backend for o in outcomes})
    return f"{counted(len({(o.group, o.index) for o in outcomes}), 'case')} on {' and '.join(backends)}"


def finding_lines(findings: list[Finding]) -> list[str]:
    """One indented line per finding, its message bounded (a message quotes the student's names)."""
    return [_finding_line(f) for f in findings]


def _finding_line(f: Finding) -> str:
    return f"  {capped(f.message, LINE_BYTES)}" + (
        f" (and {counted(f.others, 'other thread')})" if f.others else ""
    )


def _messages(findings: list[Finding]) -> list[str]:
    return _at_most(finding_lines(findings))


def _at_most(lines: list[str]) -> list[str]:
    if len(lines) > MAX_FINDINGS_SHOWN:
        lines = [*lines[:MAX_FINDINGS_SHOWN], f"  ... and {len(lines) - MAX_FINDINGS_SHOWN} more"]
    return lines


def _found(check: str, found: Sequence[tuple[CaseOutcome, Finding]]) -> str:
    """``3 bounds findings on 2 cases``."""
    cases = len({(o.group, o.index) for o, _ in found})
    return f"{counted(len(found), f'{check} finding')} on {counted(cases, 'case')}"


def _collapsed(found: Sequence[tuple[CaseOutcome, Finding]]) -> list[str]:
    """One line per kind of finding (its kind, line and array, as a launch collapses them): the
    first case's message, and every case it was found on, by its group and label."""
    cases: dict[tuple[str, int | None, str | None], list[str]] = {}
    first: dict[tuple[str, int | None, str | None], Finding] = {}
    for outcome, f in found:
        key = (f.kind, f.line, f.array)
        first.setdefault(key, f)
        cases.setdefault(key, []).append(f"{outcome.group} {outcome.label()}")
    return _at_most([_finding_line(f) + _on_cases(cases[key]) for key, f in first.items()])


def _on_cases(labels: list[str]) -> str:
    labels = list(dict.fromkeys(labels))  # a case graded on two backends is one case
    if len(labels) == 1:
        return f" (on case {labels[0]})"
    named = "; ".join(labels[:MAX_CASES_NAMED])
    more = f"; and {len(labels) - MAX_CASES_NAMED} more" if len(labels) > MAX_CASES_NAMED else ""
    return f" (on {len(labels)} cases, the first shown: {named}{more})"


def describe(outcome: CaseOutcome) -> str:
    """One case in a few lines a student can act on (no seed)."""
    return _describe_launch(outcome) + _printed(outcome.stdout)


def _describe_launch(outcome: CaseOutcome) -> str:
    head = f"- {outcome.label()} [{outcome.backend}]: "
    if outcome.error:
        return head + outcome.error
    problems = [_describe_output(o) for o in outcome.outputs if not o.ok]
    if problems:
        problems += _undefined_reads(outcome.findings)[:1]
    problems += [f"input {name} was modified by the kernel" for name in outcome.inputs_modified]
    problems += _messages([f for f in outcome.findings if f.check == "correctness"])
    if not problems:
        worst = max((o.max_abs_error or 0.0 for o in outcome.outputs), default=0.0)
        return head + f"correct (max abs error {worst:.3g})"
    return head + "; ".join(problems)


def _undefined_reads(findings: tuple[Finding, ...]) -> list[str]:
    """The reads of this launch that got no defined value: the likely cause of its wrong (often
    NaN) outputs, said beside them, since the item that scores them is another one."""
    return [
        f"the same launch {_what_was_read(f)} ({f.check} item): that read's value is undefined"
        for f in findings
        if f.kind in UNDEFINED_READS
    ]


def _what_was_read(f: Finding) -> str:
    at = f" on line {f.line}" if f.line else ""
    if f.kind == "out_of_bounds_read" and f.array is not None and f.index is not None and f.bound is not None:
        where = "past its end" if f.index >= f.bound else "before its start"
        return f"read {f.array}[{f.index}] {where}{at}"
    return f"reported: {capped(f.message, LINE_BYTES)}"


def _printed(stdout: str) -> str:
    lines = stdout.splitlines()
    if not lines:
        return ""
    shown = [f"\n    | {capped(line, LINE_BYTES)}" for line in lines[:MAX_PRINTED_LINES]]
    hidden = len(lines) - MAX_PRINTED_LINES
    if hidden > 0:
        shown.append(f"\n    | ... {counted(hidden, 'more line')}")
    return "\n  your kernel printed:" + "".join(shown)


def _describe_output(o: OutputComparison) -> str:
    """What is wrong with one output; the largest errors only with how many values they cover."""
    text = f"{o.wrong} of {counted(o.size, 'value')} of {o.name} wrong, first {o.first_wrong}: "
    text += f"got {o.got:.7g}, expected {o.expected:.7g}"
    if o.nan:
        text += f"; {counted(o.nan, 'is', 'are')} NaN (never written, or computed as NaN)"
    elif o.unwritten:
        text += f"; {o.unwritten} never written"
    if o.infinite:
        text += f"; {counted(o.infinite, 'is', 'are')} infinite"
    if o.max_abs_error is not None:
        text += f"; max abs error {o.max_abs_error:.3g}, max rel error {o.max_rel_error:.3g}"
        measured = o.size - o.unwritten - o.infinite
        if measured < o.size:
            text += f" (over the other {counted(measured, 'value')})"
    return text
