"""The grading data that flows between stages: the course, a scored item, a submission's grade.

Plain values, no behaviour beyond reading the course from disk: the pipeline makes them,
``results``, ``report`` and ``sanitize`` read them, and none of those imports another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.cases import with_drawn
from autograder.rubric import Item, Rubric, load_rubric
from autograder.spec import Spec, load_specs


@dataclass(frozen=True)
class Course:
    """Everything an instructor wrote: specs, rubric, reference and starter kernels."""

    root: Path
    specs: dict[str, Spec]
    rubric: Rubric

    def reference_source(self, name: str) -> Path:
        return self.root / "reference" / f"{name}.cu"

    def reference_counters(self, name: str) -> Path:
        """Where a handout keeps the reference's counters in place of its source (``reference_counters``)."""
        return self.root / "reference" / f"{name}.counters.json"


def read_course(root: Path, rubric_path: Path | None = None) -> Course:
    """The course at ``root`` (``assignments/``, ``rubric.yaml``, ``reference/``), validated."""
    specs = load_specs(root)
    for spec in specs.values():
        with_drawn(spec, 0)  # bounds that no size fits fail here, not at grading time
    case_groups = {name: spec.cases for name, spec in specs.items()}
    rubric = load_rubric(rubric_path or root / "rubric.yaml", case_groups)
    return Course(root=root, specs=specs, rubric=rubric)


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


@dataclass(frozen=True)
class Grade:
    """One submission graded: its items in rubric order, and how they were graded."""

    items: tuple[ItemResult, ...]
    backend: str  # the grading backend's name, for people
    seed: int  # the secret seed every case's inputs derive from
    elapsed_s: float = 0.0
    notes: tuple[str, ...] = ()  # shown to the student above the items
