"""``autograder selfcheck``: a course graded against itself. Each assignment's reference must score
full marks and its starter nothing; an item not run here (no GPU) is excused in both."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from autograder.backends.registry import Backends
from autograder.course.folder import Course
from autograder.grading import pipeline
from autograder.grading.grade import ItemResult

FOLDERS = (("reference", True), ("starter", False))  # each folder, and whether it must score full marks


@dataclass(frozen=True)
class Verdict:
    """One assignment's kernel of one of the course's folders, graded."""

    assignment: str
    folder: str  # "reference" or "starter"
    items: tuple[ItemResult, ...]
    problems: tuple[ItemResult, ...]  # the items that break what the folder must score


def verdicts(course: Course, backends: Backends, names: list[str]) -> Iterator[Verdict]:
    """The reference, then the starter, of each of ``names`` graded on ``backends``, each as it
    is graded."""
    for name in names:
        for folder, want_full in FOLDERS:
            graded = pipeline.grade_submission(course.root / folder, course, backends, None, [name])
            yield Verdict(name, folder, graded.items, tuple(problems(graded.items, want_full)))


def problems(items: tuple[ItemResult, ...], want_full: bool) -> list[ItemResult]:
    """Items that break the expectation; items not run here (no GPU) are excused."""
    run = [r for r in items if r.not_run is None]
    if want_full:
        return [r for r in run if not r.passed]
    return [r for r in run if r.score > 0 or r.regrade]
