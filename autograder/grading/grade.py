"""What grading produces: a scored item and a submission's grade.

Plain values: the pipeline makes them, ``results``, ``report``, ``sanitize`` and the delivery
layer read them. An item's evidence is typed (``evidence.py``); a grade keeps the files it
graded (``course/submitted.py``), so that nothing after it opens the submission again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.course.rubric import Item
from autograder.course.submitted import Submitted
from autograder.grading.evidence import Evidence


@dataclass(frozen=True)
class ItemResult:
    """A scored rubric item: what the student reads and what the TA reads."""

    item: Item
    score: float
    output: str  # for the student (results.json)
    evidence: Evidence = field(default_factory=Evidence)  # for the TA report (seeds included)
    regrade: bool = False  # not graded, or hit by a grader fault: a person should look
    not_run: str | None = None  # why the check could not run here (e.g. "needs a GPU")

    @property
    def passed(self) -> bool:
        return self.score >= self.item.points and not self.regrade


@dataclass(frozen=True)
class Grade:
    """One submission graded: its items in rubric order, and how they were graded."""

    items: tuple[ItemResult, ...]
    backend: str  # the grading backend's name, for people
    seed: int  # the secret seed every case's inputs derive from
    elapsed_s: float = 0.0
    notes: tuple[str, ...] = ()  # shown to the student above the items
    submitted: tuple[Submitted, ...] = ()  # each graded assignment's file as read, or why it was not
