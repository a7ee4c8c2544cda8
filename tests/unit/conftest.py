"""A tiny course whose "kernels" are Python (see fake_backend.py), and helpers to grade it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autograder.backends.registry import Backends
from autograder.course.folder import Course, read_course

from .fake_backend import FakeBackend

VEC_SPEC = """
from autograder.course.spec import Array, Scalar, Spec

def reference(a, b, n):
    return {"c": a + b}

SPEC = Spec(
    name="vec", kernel="vec",
    args=(Array("a", "n"), Array("b", "n"), Array("c", "n", intent="out"), Scalar("n", "n")),
    block=("T",), grid=("cdiv(n, T)",), defines={"BLOCK": "T"},
    cases={
        "aligned": ({"n": 64, "T": 32},),
        "ragged": ({"n": 1, "T": 32}, {"n": 70, "T": 32}),
        "safety": ({"n": 70, "T": 32}, {"n": 33, "T": 32}),
        "perf": ({"n": 1024, "T": 32},),
    },
    reference=reference, time_limit_s=5,
)
"""

GRID_SPEC = """
from autograder.course.spec import Array, Scalar, Spec

SPEC = Spec(
    name="grid2d", kernel="grid2d",
    args=(Array("x", "r * c"), Array("y", "r * c", intent="out", shape=("r", "c")), Scalar("r", "r")),
    block=(8, 8), grid=("cdiv(c, 8)", "cdiv(r, 8)"),
    cases={"aligned": ({"r": 4, "c": 6},)},
    reference=lambda x, r: {"y": 2 * x},
)
"""

RUBRIC = """
course: test course
backend: emulator
limits: {compile_s: 30, case_s: 3, submission_s: 300}
assignments:
  vec:
    items:
      - {check: correctness, cases: aligned, points: 2}
      - {check: correctness, cases: ragged,  points: 2}
      - {check: bounds,      cases: safety,  points: 1}
      - {check: barriers,    cases: safety,  points: 1}
      - {check: traffic,     cases: safety,  points: 1, metric: global_load_values,
         full_at: 1.0, zero_at: 4.0}
      - {check: performance, cases: perf,    points: 1, metric: time, full_at: 1.2, zero_at: 4.0,
         visibility: after_due_date}
  grid2d:
    items:
      - {check: correctness, cases: aligned, points: 3}
"""

VEC_REFERENCE = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 2 * n)
"""

VEC_STARTER = """
def vec(ctx, a, b, c, n):
    pass
"""

GRID_REFERENCE = """
def grid2d(ctx, x, y, r):
    y[:] = 2 * x
"""

GRID_STARTER = """
def grid2d(ctx, x, y, r):
    pass
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture
def course_root(tmp_path) -> Path:
    root = tmp_path / "course"
    write(root / "assignments/vec/spec.py", VEC_SPEC)
    write(root / "assignments/grid2d/spec.py", GRID_SPEC)
    write(root / "rubric.yaml", RUBRIC)
    write(root / "reference/vec.cu", VEC_REFERENCE)
    write(root / "reference/grid2d.cu", GRID_REFERENCE)
    write(root / "starter/vec.cu", VEC_STARTER)
    write(root / "starter/grid2d.cu", GRID_STARTER)
    return root


@pytest.fixture
def course(course_root) -> Course:
    return read_course(course_root)


@pytest.fixture
def backends() -> Backends:
    fake = FakeBackend()
    return Backends(grading=fake, safety=fake)


@pytest.fixture
def submit(tmp_path):
    """``submit(vec=SOURCE, ...)``: a submission directory holding ``<name>.cu`` per keyword."""

    def make(**kernels: str) -> Path:
        folder = tmp_path / "submission"
        for name, source in kernels.items():
            write(folder / f"{name}.cu", source)
        return folder

    return make
