"""``autograder profile``'s pipeline, whose result the CLI prints as text or JSON.

A student's kernel runs on the emulator on the cases asked for (``--case``), else on the first
case of the safety group and, for a roofline, on the case it is drawn at
(``ledger.roofline_case``); each beside the reference kernel on the same case: the counters as
grading counts them, the lecture's ledger, the lines that are also the reference's. Then the
registers, spills and occupancy ptxas gives the first case's launch, and, for a roofline, the
last case's points with both kernels as a GPU timed them where a TA report has timings (counted
on the timed case's stand-in, ``ledger.stand_in``). Nothing here prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from autograder.contract import Backend, BackendError, Counters, Launch, LaunchResult
from autograder.course.cases import GroupCase, find_case, prepare
from autograder.course.folder import Course
from autograder.course.spec import Case, Spec
from autograder.course.submitted import Submitted
from autograder.grading import pipeline
from autograder.grading.ledger import (
    Reference,
    Row,
    corresponding_lines,
    first_case,
    graded_totals,
    ledger,
    reference_counts,
    roofline_case,
    stand_in,
    timed_scale,
)
from autograder.grading.resources import launch_resources
from autograder.profile import roofline


@dataclass(frozen=True)
class LineBeside:
    """A line of the student's whose text is a line of the reference's, and both lines' counts
    (``ledger.corresponding_lines``)."""

    line: int
    reference_line: int
    source: str
    yours: dict
    reference: dict


@dataclass(frozen=True)
class CaseProfile:
    """One case of the student's kernel on the emulator, beside the reference's on that case."""

    case: Case
    which: str  # how the case was chosen, as its title says
    launch: Launch  # compiled under the student's file name
    result: LaunchResult  # its counters as grading counts them (``ledger.graded_totals``)
    source: str
    reference: Reference  # the reference's counts on the case, and where they come from
    ledger: tuple[Row, ...]
    lines: tuple[LineBeside, ...]

    @property
    def filename(self) -> str:
        return self.launch.program.filename

    def points(self, scale: dict | None = None) -> list[roofline.Point]:
        """The student's and (where counted) the reference's roofline points, grown by ``scale``."""
        counters = self.result.counters or Counters()
        points = [roofline.point("student", counters.totals, scale)]
        if self.reference.totals:
            points.append(roofline.point("reference", self.reference.totals, scale))
        return points


@dataclass(frozen=True)
class Roofline:
    """What a roofline shows: the last case's points and those a GPU timed, under a title that
    names the case (and the stand-in the timed points were counted on)."""

    title: str
    points: tuple[roofline.Point, ...]
    note: str = ""  # why a TA report's timing gave no timed points


@dataclass(frozen=True)
class KernelProfile:
    cases: tuple[CaseProfile, ...]
    resources: dict | None  # ``launch_resources``' figures for the first case's launch
    no_resources: str = ""  # why there are none
    roofline: Roofline | None = None  # when one was asked for

    @property
    def has_findings(self) -> bool:
        return any(case.result.findings for case in self.cases)


def profile_kernel(
    course: Course,
    kernel: Submitted,
    asked: tuple[Case, ...],
    seed: int,
    emulator: Backend,
    arch: str,
    with_roofline: bool = False,
    timed: dict | None = None,
) -> KernelProfile:
    """The student's ``kernel`` (an assignment's file, as grading reads it) profiled on
    ``emulator`` with ``seed``'s inputs: the ``asked`` cases (none: ``chosen_cases``), the
    resources ptxas gives the first for ``arch`` and, ``with_roofline``, the last case's roofline
    with the points of ``timed`` (a TA report's timing record, ``roofline.timed_case``). Raises
    what preparing or running a case raises (``SpecError``, ``BackendError``)."""
    spec = course.specs[kernel.assignment]
    # findings name the student's own file, as grading's do
    filename = pipeline.submitted_name(kernel.name, kernel.assignment) if kernel.name else None
    profiler = Profiler(course, spec, kernel.text, filename, seed, emulator)
    chosen = [(case, "") for case in asked] or chosen_cases(spec, with_roofline)
    cases = tuple(profiler.case(case, which) for case, which in chosen)
    drawn = profiler.roofline(cases[-1], timed) if with_roofline else None
    resources, no_resources = resources_of(cases[0].launch, arch)
    return KernelProfile(cases, resources, no_resources, drawn)


def chosen_cases(spec: Spec, with_roofline: bool) -> list[tuple[Case, str]]:
    """The first case of the safety group and, for a roofline, the case it is drawn at
    (``ledger.roofline_case``) after it; each with why it was chosen."""
    group, case = first_case(spec)
    cases = [(case, f"the first case of the {group} group")]
    group, drawn = roofline_case(spec)
    if with_roofline and drawn != case:
        cases.append((drawn, f"the roofline's case: the largest {group} case with the timed case's tiles"))
    return cases


@dataclass(frozen=True)
class Profiler:
    """What every case of one profile shares: the course, the student's kernel and the name it
    compiles under (``pipeline.submitted_name``; None: the assignment's), the inputs' seed, the
    emulator."""

    course: Course
    spec: Spec
    source: str
    filename: str | None
    seed: int
    emulator: Backend

    def case(self, case: Case, which: str = "") -> CaseProfile:
        """``case`` on the emulator, beside the reference on it; ``which`` says how it was chosen
        (empty: its group and number, where grading with the seed has it)."""
        spec = self.spec
        ref = find_case(spec, case, self.seed)
        prepared = prepare(spec, self.source, ref, self.course.rubric.limits.case_s).launch
        launch = replace(prepared, program=pipeline.named(prepared.program, self.filename))
        result = self.emulator.launch(launch)
        reference = reference_counts(self.course, spec, case, self.emulator)
        counters = graded_counters(result.counters or Counters(), spec)
        pairs = corresponding_lines(self.source, counters.by_line, reference)
        return CaseProfile(
            case=case,
            which=which or chosen_as(ref),
            launch=launch,
            result=replace(result, counters=counters),
            source=self.source,
            reference=reference,
            ledger=tuple(ledger(spec, counters, reference.totals, case)),
            lines=tuple(LineBeside(*pair) for pair in pairs),
        )

    def roofline(self, drawn: CaseProfile, timed: dict | None) -> Roofline:
        """The roofline at ``drawn``'s case and, where ``timed``, both kernels as the GPU timed
        them, at the intensities counted on the timed case's stand-in and grown to the timed case
        (``ledger.stand_in``, ``ledger.timed_scale``: the timed case is too large to count)."""
        title = f"{self.spec.name} at {roofline.case_text(drawn.case)}\n({drawn.which})"
        counted = drawn.points()
        if timed is None:
            return Roofline(title, tuple(counted))
        counted_on = stand_in(self.spec, timed["case"])
        if not counted_on:
            note = f"no aligned case of {self.spec.name} has the timed case's tiles: no timed points"
            return Roofline(title, tuple(counted), note)
        scale = timed_scale(self.spec, counted_on, timed["case"])
        measured = roofline.measured(self.case(counted_on, "stand-in").points(scale), timed)
        return Roofline(roofline.timed_title(title, counted_on, bool(scale)), (*counted, *measured))


def chosen_as(ref: GroupCase) -> str:
    """How a case given by its parameters was chosen: its group and number, or given."""
    return f"{ref.group} case {ref.index + 1}" if ref.group != "custom" else "given with --case"


def graded_counters(counters: Counters, spec: Spec) -> Counters:
    """``counters`` as grading counts them, values being bytes over the element size
    (``ledger.graded_totals``), in total and per line."""
    by_line = {line: graded_totals(row, spec) for line, row in counters.by_line.items()}
    return Counters(graded_totals(counters.totals, spec), by_line)


def resources_of(launch: Launch, arch: str) -> tuple[dict | None, str]:
    """``launch_resources``' figures of ``launch`` on ``arch``, or None and why there are none."""
    try:
        return launch_resources(launch.program, math.prod(launch.block), launch.shared_bytes, arch), ""
    except BackendError as e:
        return None, f"no resources: {e}"
