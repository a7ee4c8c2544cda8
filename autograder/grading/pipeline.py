"""A submission to scored rubric items: discover, compile, run cases, check, cross-check.

Each assignment whose ``<name>.cu`` is in the submission directory is compiled once as a
gate (a compile error fails all its items with the compiler's message), then every rubric
item runs its check. Checks ask a :class:`CaseRunner` for case outcomes, which runs each
case group at most once per backend and source, so correctness, bounds and barriers on
the same cases share launches. A failure the kernel causes fails that case with its
message; a failure of the grader fails the case as a *grader fault* (item flagged for
regrading); either way the remaining items are graded. A case group runs the cases it lists and
those it draws from the secret seed (``cases.with_drawn``). On a backend that counts
instructions, a student's launches are bounded one by one and all together by the reference's
(``WORK_MULTIPLE``, ``TOTAL_MULTIPLE``). With ``cross_check`` (``--sanitize``),
the bounds and barriers items also carry compute-sanitizer's unscored second opinion. With
``timed_only`` only the timed performance items are checked (``checks.is_timed_item``): the part of a
grading that needs a GPU, which ``autograder batch`` runs apart from the rest.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from threadpoolctl import threadpool_limits

from autograder.backends.registry import Backends
from autograder.contract import (
    Backend,
    BackendError,
    Capabilities,
    CompileError,
    Launch,
    LaunchTimeout,
    Program,
    Timing,
    TimingRequest,
    Unsupported,
)
from autograder.course import discovery
from autograder.course.cases import (
    Background,
    GroupCase,
    Prepared,
    bare_launch,
    group_cases,
    is_drawn,
    prepare,
    prepare_group,
    prepare_with_expected,
    program,
    timing_requests,
    with_drawn,
)
from autograder.course.folder import Course
from autograder.course.rubric import Item
from autograder.course.spec import Spec
from autograder.course.submitted import Submitted, opened, read_submitted
from autograder.device import Occupancy
from autograder.feedback import LINE_BYTES, capped, two_decimals
from autograder.grading import performance, reference_cache, reference_counters, sanitize
from autograder.grading.checks import SCORERS, is_timed_item, student_launches
from autograder.grading.compare import CaseOutcome, judged
from autograder.grading.evidence import Evidence
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.resources import Resources, kernel_resources

# An endless loop must cost seconds, not the whole time budget. Where the backend counts
# instructions, a student's launch may execute this many times the reference kernel's own
# lane instructions on the same case, and never fewer than the floor (correct variants of
# the course's kernels take at most 7.2 times the reference's, bench/results/contract-gpu.md).
WORK_MULTIPLE = 32
WORK_FLOOR = 10_000_000
# And all its launches of an assignment together this many times the reference's own total over
# the same cases (at least the floor): a kernel that finishes each launch under the bound above
# but is slow on every one (a racy kernel's shared read-modify-writes: 60 s for one assignment,
# against 1 s for the reference) stops there. A correct variant runs at most 7.2 times the
# reference's instructions on a case, so at most that over all of them.
TOTAL_MULTIPLE = 8
RESOURCE_ARCH = "sm_90"  # the GPU whose registers and occupancy resources items judge
STALLED_S = 2.0  # the time limit of a student's launches once one of them did not finish
# A file name NVRTC's log and the PTX's quoted ``.file`` directive carry as it is (no quote, no
# backslash, no slash, no control character), and not a hidden one: the student's own name is
# used only then (here, and by the GPU service, which writes the kernel under it).
_PLAIN_NAME = re.compile(r"[\w+,()\[\]-][\w .+,()\[\]-]{0,119}\.cu", re.ASCII | re.IGNORECASE)


class CaseRunner:
    """Runs the cases of one assignment on demand, each (backend, source, group) once."""

    def __init__(
        self,
        spec: Spec,
        sources: dict[str, str | None],
        backends: Backends,
        secret: int,
        case_s: float,
        deadline: float,
        recorded: reference_counters.Recorded | None = None,
        items: tuple[Item, ...] = (),
        filename: str | None = None,
    ):
        self.spec = _with_cases(spec, secret, recorded)
        self.sources = sources  # "student" and "reference"
        self.filename = filename  # the student's file as submitted (None: the assignment's own name)
        self.recorded = recorded  # the reference's counters, where its source is not here (a handout)
        self.roles = {
            "grading": (backends.grading, "student"),
            "safety": (backends.safety, "student"),
            "reference": (backends.safety, "reference"),
        }
        self.secret = secret
        self.case_s = case_s
        self.deadline = deadline
        self._cache: dict[tuple[int, str, str], list[CaseOutcome]] = {}  # by (backend's id, source, group)
        self._cross_checks: dict[str, list[sanitize.SanitizerRun]] = {}
        # drawn ahead (prefetch_timings): a timed group's requests, and a gating case by (group, index)
        self._timing_requests: dict[str, Background[list[TimingRequest]]] = {}
        self._drawn: dict[tuple[str, int], Background[Prepared]] = {}
        # a case's inputs and numpy reference outputs, kept from the reference's run for the student's
        self._kept: dict[tuple[str, int, int], Prepared] = {}
        self.stalled = False  # a launch of the student's kernel did not finish
        self.launched = student_launches(items)  # (role, group): where the items run the student's kernel
        self.correctness_groups = list(dict.fromkeys(i.cases for i in items if i.check == "correctness"))
        # what the student's kernel and the reference's ran on the counting backend so far
        self.work = {"student": 0, "reference": 0}

    def capabilities(self, role: str) -> Capabilities:
        return self.roles[role][0].capabilities

    def same_backend(self, role: str, other: str) -> bool:
        return self.roles[role][0] is self.roles[other][0]

    def outcomes(self, role: str, group: str) -> list[CaseOutcome]:
        backend, source_kind = self.roles[role]
        key = (id(backend), source_kind, group)
        recorded = self._recorded(source_kind)
        if key not in self._cache and recorded is not None:
            self._cache[key] = recorded.outcomes(self.spec, group, self.secret)
        if key not in self._cache:
            self._cache[key] = [
                self.run(backend, source_kind, ref) for ref in group_cases(self.spec, group, self.secret)
            ]
        return self._cache[key]

    def _recorded(self, source_kind: str) -> reference_counters.Recorded | None:
        """The recorded counters that stand for ``source_kind``'s runs: the reference's where its
        source is not here (a handout); None where its runs are run."""
        if source_kind == "reference" and self.sources["reference"] is None:
            return self.recorded
        return None

    def _source(self, source_kind: str) -> str:
        """The ``student`` or ``reference`` source, which a caller needs here (a ValueError where
        the runner has none: a handout's recording runs the reference alone)."""
        source = self.sources[source_kind]
        if source is None:
            raise ValueError(f"grader problem: no {source_kind} source for {self.spec.name}")
        return source

    def why_untimed(self) -> str | None:
        """Why the student's kernel cannot be timed against the reference here; None when it can."""
        if not self.capabilities("grading").measures_time:
            return "needs a GPU"
        if self.sources["reference"] is None:
            return "needs the reference kernel, which only the course's grader has"
        return None

    def run(self, backend: Backend, source_kind: str, ref: GroupCase) -> CaseOutcome:
        outcome = CaseOutcome(
            group=ref.group, index=ref.index, params=dict(ref.case), seed=ref.seed, backend=backend.name
        )
        source = self.sources[source_kind]
        if source is None:
            return _fault(outcome, f"grader problem: no {source_kind} source for {self.spec.name}")
        if time.monotonic() > self.deadline:
            return replace(outcome, error="not run: the submission's time limit was reached")
        student = source_kind == "student"
        left = self._work_left(ref.group) if student and backend.capabilities.sees_every_access else None
        if left is not None and left <= 0:
            return replace(outcome, error=self._stopped("not run"))
        started = time.monotonic()
        drawn = self._drawn.pop((ref.group, ref.index), None) if backend is self.roles["grading"][0] else None
        try:
            prepared = drawn.result() if drawn and student else self._prepare(source_kind, source, ref)
            launch = (
                self._limited(self.submitted(prepared.launch), backend, ref, left)
                if student
                else prepared.launch
            )
            started = time.monotonic()  # the launch's own time, not the reference's it is limited by
            judgement = self._launched(backend, source_kind, outcome, prepared, launch)
        except Unsupported as e:  # the emulator's limit, not the student's fault: a person should look
            return _fault(outcome, str(e))
        except BackendError as e:
            self.stalled |= student and isinstance(e, LaunchTimeout)
            judgement = replace(outcome, error=str(e))
        except Exception as e:  # a grader bug: fail this case, grade the rest
            return _fault(outcome, f"grader error: {type(e).__name__}: {e}")
        self.stalled |= student and any(f.kind == "instruction_budget" for f in judgement.findings)
        if left is not None:
            judgement = self._counted(judgement, ref, launch.instruction_limit == left)
        return replace(judgement, wall_s=time.monotonic() - started)

    def _launched(
        self, backend: Backend, source_kind: str, outcome: CaseOutcome, prepared: Prepared, launch: Launch
    ) -> CaseOutcome:
        """``launch`` run on ``backend`` and judged. The reference's counts where this machine keeps
        them (``reference_cache``) instead of its run, and a run's kept for the next grading."""
        if source_kind == "reference":
            kept = reference_cache.load(backend, launch)
            if kept is not None:
                return replace(outcome, counters=kept)
        judgement = judged(outcome, self.spec, prepared, backend.launch(launch))
        if source_kind == "reference":
            reference_cache.store(backend, launch, judgement)
        return judgement

    def _prepare(self, source_kind: str, source: str, ref: GroupCase) -> Prepared:
        """The case's launch of ``source``. The reference's kernel runs a case on the counting
        backend before the student's does (the work budget), on the same inputs: its run keeps
        them and their numpy reference outputs, which the student's next run of the case takes
        instead of drawing and computing them again (the same values, half the work)."""
        key = (ref.group, ref.index, ref.seed)
        if source_kind == "reference":
            prepared = prepare_with_expected(self.spec, source, ref, self.case_s)
            self._kept[key] = prepared
            return prepared
        if key not in self._kept:
            return prepare(self.spec, source, ref, self.case_s)
        kept = self._kept.pop(key)
        return replace(prepare(self.spec, source, ref, self.case_s, kept.inputs), expected=kept.expected)

    def _counted(self, judgement: CaseOutcome, ref: GroupCase, last: bool) -> CaseOutcome:
        """``judgement`` (a student's launch on the counting backend) and the reference's on its
        case added to the work; failed with why when it was ``last`` (its limit, what was left of
        the total) and did not finish."""
        self.work["student"] += _instructions(judgement) or 0
        self.work["reference"] += _instructions(self.outcomes("reference", ref.group)[ref.index]) or 0
        if last and any(f.kind == "instruction_budget" for f in judgement.findings):
            return replace(judgement, error=self._stopped("stopped"))
        return judgement

    def _work_left(self, group: str) -> int | None:
        """Lane instructions the student's launches on the counting backend may still run:
        ``TOTAL_MULTIPLE`` times the reference's over every case the items (and ``group``) run
        there, at least ``WORK_FLOOR``, less what they ran; None when the reference's are not known.
        """
        counted = [g for role, g in self.launched if self.capabilities(role).sees_every_access]
        reference = [
            _instructions(o) for g in dict.fromkeys([*counted, group]) for o in self.outcomes("reference", g)
        ]
        known = [n for n in reference if n is not None]
        if len(known) < len(reference):
            return None
        return max(WORK_FLOOR, TOTAL_MULTIPLE * sum(known)) - self.work["student"]

    def _stopped(self, how: str) -> str:
        ratio = self.work["student"] / max(1, self.work["reference"])
        return (
            f"{how}: your kernel ran {two_decimals(ratio)} times the reference's instructions over "
            f"the graded cases; the grader stops at {TOTAL_MULTIPLE} times"
        )

    def correctness_outcomes(self) -> list[CaseOutcome]:
        return [o for group in self.correctness_groups for o in self.outcomes("grading", group)]

    def student_outcomes(self) -> list[CaseOutcome]:
        """Every launch of the student's kernel that the items make (``checks.student_launches``),
        each once: a backend playing two roles runs a group once."""
        keys: dict[tuple[int, str], tuple[str, str]] = {}
        for role, group in self.launched:
            keys.setdefault((id(self.roles[role][0]), group), (role, group))
        return [o for role, group in keys.values() for o in self.outcomes(role, group)]

    def _limited(self, launch: Launch, backend: Backend, ref: GroupCase, left: int | None) -> Launch:
        """A student's launch, its work bounded by the reference's on its case and by what is
        ``left`` of the total (None: no total); short once one did not finish."""
        if self.stalled:
            launch = replace(
                launch, time_limit_s=min(launch.time_limit_s, STALLED_S), instruction_limit=WORK_FLOOR
            )
        elif backend.capabilities.sees_every_access:
            counted = _instructions(self.outcomes("reference", ref.group)[ref.index])
            if counted:
                launch = replace(launch, instruction_limit=max(WORK_FLOOR, WORK_MULTIPLE * counted))
        if left is None:
            return launch
        return replace(launch, instruction_limit=min(left, launch.instruction_limit or left))

    def prefetch_timings(self, groups: list[str]) -> None:
        """Draw the cases of timed ``groups`` in the background while the other items run: the
        inputs (and the numpy reference's outputs) of the student's gating launches on the grading
        backend, and the timing's input sets; the same values :meth:`run` and :meth:`timings`
        would draw. Nothing when the grading backend cannot time."""
        if self.why_untimed() is not None:
            return
        sources = self._timed_sources()
        for group in groups:
            if group in self._timing_requests:
                continue
            gate = []
            for ref in group_cases(self.spec, group, self.secret):
                gate.append(
                    Background(prepare_with_expected, self.spec, sources["student"], ref, self.case_s)
                )
                self._drawn[(group, ref.index)] = gate[-1]
            requests = timing_requests(self.spec, sources, group, self.secret, self.case_s)
            self._timing_requests[group] = Background(_listed_after, gate, requests)

    def timings(self, group: str, scoring: performance.Scoring | None = None) -> list[Timing]:
        """Student against reference on the grading backend, each case with its physical floor.

        With ``scoring`` each case is timed to the precision its item's score needs, and its
        repeats may end sooner once its ratio is decided outside the scored range
        (``gpu_timing.stop_reason``). The item's score combines its cases, so decided cases stand only
        where they decide it: those the combination still needs (``performance.timed_again``) are
        timed again on their same inputs, to that precision."""
        drawn = self._timing_requests.pop(group, None)
        requests = drawn.result() if drawn else self._timing_requests_of(group)
        if scoring is None:
            return [self._timed(r) for r in requests]
        precise = functools.partial(replace, target_spread=scoring.spread)
        timings = [self._timed(precise(r, scored_between=scoring.between)) for r in requests]
        again = performance.timed_again(timings, scoring)
        for k, request in enumerate(self._timing_requests_of(group) if again else ()):
            if k in again:
                timings[k] = self._timed(precise(request))
        return timings

    def _timing_requests_of(self, group: str) -> Iterator[TimingRequest]:
        """The timing's requests for ``group``, drawn now (each time the same: their seeds are the case's)."""
        return timing_requests(self.spec, self._timed_sources(), group, self.secret, self.case_s)

    def _timed(self, request: TimingRequest) -> Timing:
        """One case timed on the grading backend, with its physical floor."""
        timing = self.roles["grading"][0].time(self._submitted_request(request))
        return performance.with_work(timing, performance.minimum_work(self.spec, request.case))

    def _timed_sources(self) -> dict[str, str]:
        """Both kernels' sources, as timing needs them (where ``why_untimed`` is None)."""
        return {"student": self._source("student"), "reference": self._source("reference")}

    def submitted(self, launch: Launch) -> Launch:
        """A launch of the student's kernel whose compile log and findings name the student's file."""
        return replace(launch, program=named(launch.program, self.filename))

    def _submitted_request(self, request: TimingRequest) -> TimingRequest:
        return replace(request, student=tuple(map(self.submitted, request.student)))

    def resources(self, group: str) -> list[tuple[dict[str, int | float], Resources, Occupancy]]:
        """What ptxas gives the student's kernel for sm_90 on each case of ``group``, and the occupancy."""
        figures = []
        for case in (ref.case for ref in group_cases(self.spec, group, self.secret)):
            launch = self.submitted(bare_launch(self.spec, self._source("student"), case, self.case_s))
            found = kernel_resources(launch.program, RESOURCE_ARCH)
            figures.append((dict(case), found, found.occupancy(math.prod(launch.block), launch.shared_bytes)))
        return figures

    def launches(self, group: str) -> Iterator[Launch]:
        """The student's launches of ``group``, exactly as grading ran them."""
        return (
            self.submitted(p.launch)
            for p in prepare_group(self.spec, self._source("student"), group, self.secret, self.case_s)
        )

    def cross_check(self, group: str) -> list[sanitize.SanitizerRun]:
        """compute-sanitizer's runs over ``group`` (once per group)."""
        if group not in self._cross_checks:
            self._cross_checks[group] = sanitize.cross_check(self.launches(group))
        return self._cross_checks[group]


def _with_cases(spec: Spec, secret: int, recorded: reference_counters.Recorded | None) -> Spec:
    """``spec`` with the cases its groups draw for ``secret``; where the reference's counters are
    recorded (a handout), each recorded group's drawn cases are those recorded after its listed ones,
    the only ones whose counters are known."""
    spec = with_drawn(spec, secret)
    if recorded is None:
        return spec
    kept = {
        group: tuple(entry["case"] for entry in entries[len(spec.cases[group]) :])
        for group, entries in recorded.groups.items()
        if group in spec.cases
    }
    return replace(spec, drawn={**spec.drawn, **kept})


def _instructions(outcome: CaseOutcome) -> int | None:
    """The lane instructions a launch executed, where its backend counts them."""
    return outcome.counters.totals.get("lane_instructions") if outcome.counters else None


def _listed_after(
    first: list[Background[Prepared]], requests: Iterator[TimingRequest]
) -> list[TimingRequest]:
    """``requests`` drawn once ``first`` are done: the gating cases, needed first, get the cores."""
    for drawn in first:
        drawn.wait()
    return list(requests)


def named(program: Program, filename: str | None) -> Program:
    """``program`` as ``filename`` (the student's file), so that NVRTC's log, ptxas's and the
    findings name the file the student submitted, not the assignment's (None: unchanged)."""
    return replace(program, filename=filename) if filename else program


def submitted_name(name: str, assignment: str) -> str:
    """The name the student's file ``name`` goes by in compiles: its own (``attempt1.cu``) where
    NVRTC and the PTX's ``.file`` directive carry it unchanged, else the assignment's."""
    return name if _PLAIN_NAME.fullmatch(name) else f"{assignment}.cu"


def _fault(outcome: CaseOutcome, message: str) -> CaseOutcome:
    return replace(outcome, error=message, grader_fault=True)


def grade_submission(
    submission: Path,
    course: Course,
    backends: Backends,
    seed: int | None = None,
    assignments: list[str] | None = None,
    progress: Callable[[ItemResult], None] | None = None,
    cross_check: bool = False,
    timed_only: bool = False,
) -> Grade:
    """Grade every assignment of ``submission`` (or ``assignments``) and return the scored items.

    ``cross_check``: also run the bounds and barriers items' cases under compute-sanitizer (a
    grading backend that ``runs_natively`` only; elsewhere a note says it was not run).
    ``timed_only``: grade the timed performance items alone, each exactly as in a whole grading
    (the compile gate, then the correctness cases and its own cases on the grading backend as its
    gates, then the timing), so that a GPU spends its time on nothing else.
    """
    started = time.monotonic()
    secret = seed if seed is not None else secrets.randbits(63)
    check_assignments(course, assignments or [])
    notes: list[str] = []
    if cross_check and not backends.grading.capabilities.runs_natively:
        notes.append(
            "--sanitize was not run: compute-sanitizer needs a GPU, and the "
            f"{backends.grading.name} backend graded"
        )
        cross_check = False
    deadline = started + course.rubric.limits.submission_s
    items = []
    with opened(submission, course) as found, _blas_threads(backends.grading):
        names = assignments or _submitted(submission, found, course, notes)
        notes += [*found.notes, *filter(None, map(found.note, names))]
        read = [read_submitted(found, name) for name in names]
        if not timed_only:
            _compile_ahead(backends.safety, programs_ahead(course, read, secret))
        for submitted in read:
            graded = _grade_assignment(submitted, course, backends, secret, deadline, cross_check, timed_only)
            for result in graded:
                items.append(result)
                if progress:
                    progress(result)
    return Grade(
        items=tuple(items),
        backend=backends.grading.name,
        seed=secret,
        elapsed_s=time.monotonic() - started,
        notes=tuple(notes),
        submitted=tuple(read),
    )


def programs_ahead(course: Course, submitted: list[Submitted], secret: int) -> tuple[Program, ...]:
    """The programs a grading of ``submitted`` with ``secret`` compiles on its safety backend, each
    once, in about the order it asks for them: for each assignment read without a problem, the
    student's kernel and the reference's for the define set of each case its items run (listed
    and drawn; a timed case's define sets are its stand-in's, ``ledger``), so that they can be
    compiled ahead (``Backend.compile_ahead``). A handout's drawn cases (recorded ones) are not
    among them: those compile as they come."""
    programs: dict[Program, None] = {}
    for one in submitted:
        if one.problem is not None:
            continue
        spec = with_drawn(course.specs[one.assignment], secret)
        reference = _reference_text(course, one.assignment)
        sources = [(one.text, _compiled_name(one, spec))] + ([(reference, None)] if reference else [])
        for group in dict.fromkeys(item.cases for item in course.rubric.assignments[one.assignment]):
            for ref in group_cases(spec, group, secret):
                programs.update((named(program(spec, text, ref.case), name), None) for text, name in sources)
    return tuple(programs)


def _compiled_name(submitted: Submitted, spec: Spec) -> str | None:
    """The name the student's file goes by in compiles (``submitted_name``); None: the assignment's."""
    return submitted_name(submitted.name, spec.name) if submitted.name else None


def _reference_text(course: Course, name: str) -> str | None:
    """The reference kernel's source, or None where the course has none (a handout)."""
    reference = course.reference_source(name)
    return reference.read_text() if reference.exists() else None


def _compile_ahead(backend: Backend, programs: tuple[Program, ...]) -> None:
    """``backend.compile_ahead(programs)``: a head start only, so whatever stops it (a worker that
    cannot start, no process left to fork) costs the head start, never the grading; each compile
    meets it again in its turn, where it is reported as that compile's."""
    with contextlib.suppress(Exception):
        backend.compile_ahead(programs)


def _blas_threads(grading: Backend) -> contextlib.AbstractContextManager[object]:
    """numpy's BLAS on one thread while a grading that times nothing runs: its references are
    small matrices, between which OpenBLAS's idle threads spin on the cores the emulator worker
    needs (the whole course on 2 cores: 12.4 -> 8.7 s CPU, the verdicts the same). A grading that
    times kernels on a GPU keeps every thread: its float64 references of 4096-cubed GEMMs want them."""
    if grading.capabilities.measures_time:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def check_assignments(course: Course, names: list[str]) -> None:
    """A ValueError naming the first of ``names`` that the rubric does not have."""
    unknown = [name for name in names if name not in course.rubric.assignments]
    if unknown:
        known = ", ".join(course.rubric.assignments)
        raise ValueError(f"unknown assignment {unknown[0]!r} (the rubric has: {known})")


def _submitted(submission: Path, found: discovery.Submission, course: Course, notes: list[str]) -> list[str]:
    """Assignments whose file is in the submission (``discovery``); all of them (to fail) when none is."""
    names = list(course.rubric.assignments)
    if not submission.exists():
        notes.append("the submission could not be read (no folder of files was found); nothing was graded")
        return names
    submitted = [name for name in names if found.candidates(name)]
    if submitted:
        return submitted
    expected = ", ".join(f"{name}.cu" for name in names)
    notes.append(f"no kernel file found in the submission; expected one of: {expected} ({found.inventory()})")
    return names


def _grade_assignment(
    submitted: Submitted,
    course: Course,
    backends: Backends,
    secret: int,
    deadline: float,
    cross_check: bool,
    timed_only: bool = False,
) -> Iterator[ItemResult]:
    name = submitted.assignment
    items = course.rubric.assignments[name]
    checked = tuple(filter(is_timed_item, items)) if timed_only else items
    if not checked:
        return
    spec = course.specs[name]
    source, problem, regrade = submitted.text, submitted.problem, False
    filename = _compiled_name(submitted, spec)
    if problem is None:
        problem, regrade = _compile_problem(backends.grading, spec, source, items, filename)
    if problem is not None:  # each item's words as a whole grading gives them
        yield from (r for r in _ungraded(items, problem, regrade) if r.item in checked)
        return
    sources = {"student": source, "reference": _reference_text(course, name)}
    recorded = (
        reference_counters.load(course.reference_counters(name)) if sources["reference"] is None else None
    )
    runner = CaseRunner(
        spec, sources, backends, secret, course.rubric.limits.case_s, deadline, recorded, items, filename
    )
    # the runner knows every item of the assignment: a timed item's gates are the correctness items'
    runner.prefetch_timings([i.cases for i in items if is_timed_item(i)])
    for item in checked:
        result = check_item(item, runner)
        if cross_check and item.check in sanitize.CROSS_CHECKED:
            result = sanitize.with_cross_check(result, runner.cross_check(item.cases))
        yield _drawn_marked(result, runner.spec)


def _drawn_marked(result: ItemResult, spec: Spec) -> ItemResult:
    """``result`` with each case of its evidence saying whether its group drew it (TA report)."""
    if result.evidence.cases is None:
        return result
    cases = tuple(replace(c, drawn=is_drawn(spec, c.group, c.index)) for c in result.evidence.cases)
    return replace(result, evidence=replace(result.evidence, cases=cases))


def _ungraded(items: tuple[Item, ...], problem: str, regrade: bool) -> Iterator[ItemResult]:
    """Every item at 0: the first with the whole problem (a compiler's log), the others with its gist."""
    first, *rest = items
    yield ItemResult(first, 0.0, problem, regrade=regrade)
    lines = problem.strip().splitlines() or [problem]
    gist = " ".join(dict.fromkeys([lines[0], next((line for line in lines if "error" in line), lines[0])]))
    if len(lines) > 1:
        gist = f"{capped(gist, LINE_BYTES)} (the whole message is under '{first.name}')"
    yield from (ItemResult(item, 0.0, gist, regrade=regrade) for item in rest)


def check_item(item: Item, runner: CaseRunner) -> ItemResult:
    try:
        return SCORERS[item.check](item, runner)
    except Exception as e:  # a grader bug: this item is lost, the rest are graded
        message = f"grader error ({type(e).__name__}: {e}); this item is flagged for regrading"
        return ItemResult(item, 0.0, message, Evidence(detail={"grader_error": repr(e)}), regrade=True)


def _compile_problem(
    backend: Backend, spec: Spec, source: str, items: tuple[Item, ...], filename: str | None
) -> tuple[str | None, bool]:
    """Compile the first case's program once; a compile error fails every item of the assignment.

    Returns the problem and whether it is the grader's (the compiler could not run: regrade).
    """
    case = spec.cases[items[0].cases][0]
    try:
        backend.compile(named(program(spec, source, case), filename))
    except CompileError as e:
        return str(e), False
    except Exception as e:  # a crashed worker or a grader bug: this assignment is flagged, the rest graded
        return f"the compiler could not run ({type(e).__name__}: {e}); flagged for regrading", True
    return None, False
