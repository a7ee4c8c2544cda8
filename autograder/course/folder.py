"""A course folder read from disk: everything an instructor wrote, validated before any grading."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autograder.course.cases import with_drawn
from autograder.course.rubric import Rubric, load_rubric
from autograder.course.spec import Spec, load_specs


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
