"""A submission to scored rubric items: discover, compile, run cases, check.

Each assignment whose ``<name>.cu`` is in the submission directory is compiled once as a
gate (a compile error fails all its items with the compiler's message), then every rubric
item runs its check. Checks ask a :class:`CaseRunner` for case outcomes, which runs each
case group at most once per backend and source, so correctness, bounds and barriers on
the same cases share launches. A failure the kernel causes fails that case with its
message; a failure of the grader fails the case as a *grader fault* (item flagged for
regrading); either way the remaining items are graded.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gradescope_utils.autograder_utils.files import check_submitted_files

from autograder.backends.base import Backend, BackendError, CompileError, Unsupported
from autograder.backends.gpu_timing import timing_request
from autograder.cases import case_seed, prepare, program
from autograder.checks import CHECKS, CaseOutcome, ItemResult, compare
from autograder.performance import Timing
from autograder.policy import read_source
from autograder.rubric import Item, Rubric, load_rubric
from autograder.spec import Spec, load_course


@dataclass(frozen=True)
class Course:
    """Everything an instructor wrote: specs, rubric, reference and starter kernels."""

    root: Path
    specs: dict[str, Spec]
    rubric: Rubric

    def reference_source(self, name: str) -> Path:
        return self.root / "reference" / f"{name}.cu"


def load(root: Path, rubric_path: Path | None = None) -> Course:
    """Load the course at ``root`` (``assignments/``, ``rubric.yaml``, ``reference/``)."""
    specs = load_course(root)
    case_groups = {name: spec.cases for name, spec in specs.items()}
    rubric = load_rubric(rubric_path or root / "rubric.yaml", case_groups)
    return Course(root=root, specs=specs, rubric=rubric)


@dataclass(frozen=True)
class Backends:
    """The grading backend, and the one safety checks run on (the emulator; may be the same)."""

    grading: Backend
    safety: Backend


@dataclass
class Grade:
    items: list[ItemResult]
    backend: str
    seed: int
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)  # shown to the student above the items


class CaseRunner:
    """Runs the cases of one assignment on demand, each (backend, source, group) once."""

    def __init__(self, spec: Spec, sources: dict[str, str | None], backends: Backends, secret: int,
                 case_s: float, deadline: float):
        self.spec = spec
        self.sources = sources  # "student" and "reference"
        self.roles = {
            "grading": (backends.grading, "student"),
            "safety": (backends.safety, "student"),
            "reference": (backends.safety, "reference"),
        }
        self.secret = secret
        self.case_s = case_s
        self.deadline = deadline
        self._cache: dict[tuple, list[CaseOutcome]] = {}

    def backend_name(self, role: str) -> str:
        return self.roles[role][0].name

    def timings(self, group: str) -> list[Timing]:
        gpu = self.roles["grading"][0]
        return [gpu.time(timing_request(self.spec, self.sources, case, group, i, self.secret, self.case_s))
                for i, case in enumerate(self.spec.cases[group])]

    def outcomes(self, role: str, group: str) -> list[CaseOutcome]:
        backend, source_kind = self.roles[role]
        key = (backend.name, source_kind, group)
        if key not in self._cache:
            self._cache[key] = [
                self.run(backend, source_kind, group, index, case)
                for index, case in enumerate(self.spec.cases[group])
            ]
        return self._cache[key]

    def run(self, backend: Backend, source_kind: str, group: str, index: int, case) -> CaseOutcome:
        seed = case_seed(self.secret, self.spec.name, group, index)
        outcome = CaseOutcome(group=group, index=index, params=dict(case), seed=seed, backend=backend.name)
        source = self.sources[source_kind]
        if source is None:
            return _fault(outcome, f"grader problem: no {source_kind} source for {self.spec.name}")
        if time.monotonic() > self.deadline:
            return _replace(outcome, error="not run: the submission's time limit was reached")
        try:
            prepared = prepare(self.spec, source, case, seed, self.case_s)
            result = backend.launch(prepared.launch)
            evidence = compare(self.spec, case, prepared, result)
        except Unsupported as e:  # the emulator's limit, not the student's fault: a person should look
            return _fault(outcome, str(e))
        except BackendError as e:
            return _replace(outcome, error=str(e))
        except Exception as e:  # a grader bug: fail this case, grade the rest
            return _fault(outcome, f"grader error: {type(e).__name__}: {e}")
        return _replace(outcome, findings=tuple(result.findings), counters=result.counters,
                        elapsed_ms=result.elapsed_ms, stdout=result.stdout, **evidence)


def _replace(outcome: CaseOutcome, **changes) -> CaseOutcome:
    return CaseOutcome(**{**outcome.__dict__, **changes})


def _fault(outcome: CaseOutcome, message: str) -> CaseOutcome:
    return _replace(outcome, error=message, grader_fault=True)


def grade_submission(
    submission: Path,
    course: Course,
    backends: Backends,
    seed: int | None = None,
    assignments: list[str] | None = None,
    progress: Callable[[ItemResult], None] | None = None,
) -> Grade:
    """Grade every assignment of ``submission`` (or ``assignments``) and return the scored items."""
    started = time.monotonic()
    secret = seed if seed is not None else secrets.randbits(63)
    grade = Grade(items=[], backend=backends.grading.name, seed=secret)
    check_assignments(course, assignments or [])
    names = assignments or _submitted(submission, course, grade.notes)
    deadline = started + course.rubric.limits.submission_s
    for name in names:
        for result in _grade_assignment(name, submission, course, backends, secret, deadline):
            grade.items.append(result)
            if progress:
                progress(result)
    grade.elapsed_s = time.monotonic() - started
    return grade


def check_assignments(course: Course, names: list[str]) -> None:
    """A ValueError naming the first of ``names`` that the rubric does not have."""
    unknown = [name for name in names if name not in course.rubric.assignments]
    if unknown:
        known = ", ".join(course.rubric.assignments)
        raise ValueError(f"unknown assignment {unknown[0]!r} (the rubric has: {known})")


def _submitted(submission: Path, course: Course, notes: list[str]) -> list[str]:
    """Assignments whose file is in the submission; all of them (to fail) when none is."""
    names = list(course.rubric.assignments)
    missing = check_submitted_files([f"{name}.cu" for name in names], base=str(submission))
    found = [name for name in names if f"{name}.cu" not in missing]
    if found:
        return found
    notes.append(f"no kernel file found in the submission; expected one of: {', '.join(missing)}")
    return names


def _grade_assignment(name: str, submission: Path, course: Course, backends: Backends, secret: int,
                      deadline: float):
    items = course.rubric.assignments[name]
    spec = course.specs[name]
    source, problem = read_source(submission / f"{name}.cu")
    regrade = False
    if problem is None:
        problem, regrade = _compile_problem(backends.grading, spec, source, items)
    if problem is not None:
        yield from (ItemResult(item, 0.0, problem, regrade=regrade) for item in items)
        return
    reference = course.reference_source(name)
    sources = {"student": source, "reference": reference.read_text() if reference.exists() else None}
    runner = CaseRunner(spec, sources, backends, secret, course.rubric.limits.case_s, deadline)
    for item in items:
        yield check_item(item, runner)


def check_item(item: Item, runner: CaseRunner) -> ItemResult:
    try:
        return CHECKS[item.check](item, runner)
    except Exception as e:  # a grader bug: this item is lost, the rest are graded
        message = f"grader error ({type(e).__name__}: {e}); this item is flagged for regrading"
        return ItemResult(item, 0.0, message, {"grader_error": repr(e)}, regrade=True)


def _compile_problem(
    backend: Backend, spec: Spec, source: str, items: tuple[Item, ...]
) -> tuple[str | None, bool]:
    """Compile the first case's program once; a compile error fails every item of the assignment.

    Returns the problem and whether it is the grader's (the compiler could not run: regrade).
    """
    case = spec.cases[items[0].cases][0]
    try:
        backend.compile(program(spec, source, case))
    except CompileError as e:
        return str(e), False
    except Exception as e:  # a crashed worker or a grader bug: this assignment is flagged, the rest graded
        return f"the compiler could not run ({type(e).__name__}: {e}); flagged for regrading", True
    return None, False
