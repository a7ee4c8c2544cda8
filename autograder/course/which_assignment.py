"""Which assignment a lone kernel file is for (``autograder check`` without ``--assignment``): the
rubric's assignments it could be, by its name or the ``__global__`` kernel it defines, as
``discovery`` finds an assignment's file in a submission."""

from __future__ import annotations

from pathlib import Path

from autograder.course import submitted
from autograder.course.folder import Course


def candidates(kernel: Path, course: Course) -> list[str]:
    """The rubric's assignments the file ``kernel`` could be for: one where it says which."""
    with submitted.opened(kernel, course) as found:
        return [name for name in course.rubric.assignments if found.candidates(name)]
