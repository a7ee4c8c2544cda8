"""An assignment's file in a submission, read the one way: found by ``discovery``, read by the policy.

:func:`read_submitted` is what the grading reads (``grading/pipeline.py``), and the ``Grade``
keeps it, so that nothing after the grading (the GPU service's client) opens the submission
again. :func:`kernels` is the course's ``{assignment: kernel name}``, what ``discovery`` finds
an assignment's file by besides its name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from autograder.course import discovery
from autograder.course.folder import Course
from autograder.course.policy import read_source


@dataclass(frozen=True)
class Submitted:
    """One assignment's file as the student submitted it, or why it cannot be graded."""

    assignment: str
    name: str | None = None  # the file's own name, as the student named it; None: no file was found
    text: str = ""  # what was read of it ("" when nothing could be)
    problem: str | None = None  # why it cannot be graded (the sentence the student reads); None: it can


def kernels(course: Course) -> dict[str, str]:
    """Each assignment's kernel (``spec.kernel``): ``discovery`` finds a file by the kernel it declares."""
    return {name: spec.kernel for name, spec in course.specs.items()}


@contextlib.contextmanager
def opened(submission: Path, course: Course) -> Iterator[discovery.Submission]:
    """``discovery.opened`` with the course's kernels: the submission's files, its one ``.zip`` unpacked."""
    with discovery.opened(submission, kernels(course)) as found:
        yield found


def read_submitted(found: discovery.Submission, assignment: str) -> Submitted:
    """``assignment``'s file in ``found`` (``discovery``) read under the source policy (``policy``)."""
    path, problem = found.locate(assignment)
    if path is None:
        return Submitted(assignment, problem=problem)
    text, problem = read_source(path)
    return Submitted(assignment, path.name, text, problem)
