"""``autograder handout`` on the fake course: its files, no solution, and grading from it alone.

The real course's handout (every reference's solution looked for, ``check`` run from it) is
tests/delivery/test_handout.py.
"""

from __future__ import annotations

import json
import zipfile

import pytest

from autograder.backends.registry import Backends
from autograder.contract import Capabilities
from autograder.course.folder import read_course
from autograder.delivery import handout, packaging
from autograder.grading import pipeline

from .conftest import VEC_REFERENCE, write
from .fake_backend import FakeBackend

# loads each input value three times (the reference loads it once: 2n)
VEC_THRICE = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 6 * n)
"""


@pytest.fixture
def handout_root(course, backends, tmp_path):
    handout.build(course, ["vec"], tmp_path / "handout", backends)
    return tmp_path / "handout"


def test_the_handout_holds_starters_handouts_cases_counters_and_the_grader_but_no_reference(handout_root):
    files = {p.relative_to(handout_root).as_posix() for p in handout_root.rglob("*") if p.is_file()}
    assert {
        "README.md",
        "pyproject.toml",
        "rubric.yaml",
        "assignments/vec/spec.py",
        "starter/vec.cu",
    } <= files
    assert "reference/vec.counters.json" in files and "autograder/cli/__init__.py" in files
    assert not [f for f in files if f.endswith(".cu") and not f.startswith("starter/")]
    assert not [f for f in files if "grid2d" in f]
    assert list(read_course(handout_root).rubric.assignments) == ["vec"]
    assert "autograder check starter/vec.cu" in (handout_root / "README.md").read_text()


def test_the_recorded_counters_are_totals_per_case_in_the_specs_order(handout_root, course):
    recorded = json.loads((handout_root / "reference/vec.counters.json").read_text())
    assert sorted(recorded["groups"]) == ["aligned", "ragged", "safety"]  # perf is timed: not recorded
    safety = recorded["groups"]["safety"]
    assert [entry["case"] for entry in safety] == [dict(c) for c in course.specs["vec"].cases["safety"]]
    assert [entry["totals"] for entry in safety] == [{"global_load_values": 140}, {"global_load_values": 66}]


@pytest.mark.parametrize("source", [VEC_THRICE, VEC_REFERENCE])
def test_grading_from_the_handout_scores_as_the_course_does(handout_root, course, backends, submit, source):
    submission = submit(vec=source)
    here = pipeline.grade_submission(submission, course, backends, seed=5)
    there = pipeline.grade_submission(submission, read_course(handout_root), backends, seed=5)
    assert [(r.score, r.output) for r in here.items] == [(r.score, r.output) for r in there.items]
    traffic = next(r for r in there.items if r.item.check == "traffic")
    full = source == VEC_REFERENCE
    assert not traffic.regrade and (traffic.score == 1.0 if full else 0 < traffic.score < 1.0)  # 3x the count


def test_counters_that_no_longer_fit_the_spec_are_the_graders_fault(handout_root, backends, submit):
    spec = handout_root / "assignments/vec/spec.py"
    spec.write_text(spec.read_text().replace('{"n": 33, "T": 32}', '{"n": 34, "T": 32}'))
    graded = pipeline.grade_submission(submit(vec=VEC_THRICE), read_course(handout_root), backends, seed=1)
    traffic = next(r for r in graded.items if r.item.check == "traffic")
    assert traffic.score == 0 and traffic.regrade
    assert "vec.counters.json has no counters for safety case n=34, T=32" in traffic.output


def test_unreadable_counters_are_the_graders_fault_not_a_crash(handout_root, backends, submit):
    (handout_root / "reference/vec.counters.json").write_text("{not json")
    graded = pipeline.grade_submission(submit(vec=VEC_THRICE), read_course(handout_root), backends, seed=1)
    traffic = next(r for r in graded.items if r.item.check == "traffic")
    assert traffic.regrade and "vec.counters.json cannot be read" in traffic.output


def test_a_performance_item_in_the_handout_says_the_course_grader_times_it(handout_root, submit):
    timing = FakeBackend("gpu", Capabilities(measures_time=True, runs_natively=True))
    backends = Backends(grading=timing, safety=FakeBackend())
    graded = pipeline.grade_submission(submit(vec=VEC_THRICE), read_course(handout_root), backends, seed=1)
    performance = next(r for r in graded.items if r.item.check == "performance")
    assert performance.not_run == "needs the reference kernel, which only the course's grader has"
    assert performance.score == 0 and performance.output.startswith("not run: needs the reference kernel")


def test_two_zips_of_the_same_course_are_the_same_bytes(course, backends, tmp_path):
    handout.build(course, ["vec"], tmp_path / "a.zip", backends)
    handout.build(course, ["vec"], tmp_path / "b.zip", backends)
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert "reference/vec.counters.json" in archive.namelist()


def test_an_existing_folder_is_never_overwritten(handout_root, course, backends):
    with pytest.raises(packaging.BuildError, match="already exists"):
        handout.build(course, ["vec"], handout_root, backends)


def test_a_reference_that_fails_is_named_and_no_handout_is_left(course, course_root, backends, tmp_path):
    write(course_root / "reference/vec.cu", "def vec(ctx, a, b, c, n):\n    raise IndexError('oops')\n")
    with pytest.raises(packaging.BuildError, match="vec: the reference kernel failed on aligned case n=64"):
        handout.build(course, ["vec"], tmp_path / "h.zip", backends)
    assert not (tmp_path / "h.zip").exists()
