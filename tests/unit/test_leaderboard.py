"""Gradescope's leaderboard: opt-in in the rubric, one ascending entry per measured time ratio."""

import json
from pathlib import Path

import pytest

from autograder.contract import Timing
from autograder.course.folder import read_course
from autograder.course.rubric import RubricError, load_rubric
from autograder.grading import performance, pipeline
from autograder.grading.evidence import Evidence
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.results import build_results

from .conftest import RUBRIC
from .test_performance import _timing as timing

GROUPS = {"vec": {"aligned": (), "safety": (), "perf": ()}, "mm": {"aligned": (), "perf": ()}}

RUBRIC_TEXT = """\
course: c
backend: emulator
leaderboard: true
assignments:
  vec:
    items:
      - {check: correctness, cases: aligned, points: 2}
      - {check: traffic, cases: safety, points: 1, metric: global_load_values, full_at: 1.0, zero_at: 4.0}
      - {check: performance, cases: perf, points: 3, metric: time, full_at: 1.2, zero_at: 4.0,
         visibility: after_due_date}
  mm:
    items:
      - {check: performance, cases: perf, points: 2, metric: time, full_at: 1.2, zero_at: 4.0, name: mm small}
      - {check: performance, cases: perf, points: 2, metric: time, full_at: 1.2, zero_at: 4.0, name: mm large}
"""


def rubric(tmp_path: Path, text: str = RUBRIC_TEXT):
    path = tmp_path / "rubric.yaml"
    path.write_text(text)
    return load_rubric(path, GROUPS)


def timed(item, *timings: Timing) -> ItemResult:
    """A performance item scored from its timings, as ``checks.performance_check`` records it."""
    evidence = performance.score_timings(timings, item.full_at, item.zero_at)
    return ItemResult(
        item,
        round(item.points * evidence.fraction, 4),
        evidence.message,
        Evidence(cases=(), ratio=evidence),
        regrade=evidence.below_floor,
    )


def not_run(item) -> ItemResult:
    evidence = performance.not_run(item.metric, "needs a GPU")
    return ItemResult(
        item, 0.0, evidence.message, Evidence(ratio=evidence), regrade=True, not_run="needs a GPU"
    )


def counted(item, student: int, reference: int) -> ItemResult:
    counts = [performance.CounterRatio({"n": 70}, student, reference)]
    evidence = performance.score_counters(item.metric, counts, item.full_at, item.zero_at)
    return ItemResult(item, item.points * evidence.fraction, evidence.message, Evidence(ratio=evidence))


def grade_of(*items: ItemResult) -> Grade:
    return Grade(items=items, backend="gpu", seed=1)


def measured_grade(r) -> Grade:
    correct, traffic, speed = r.assignments["vec"]
    small, large = r.assignments["mm"]
    return grade_of(
        ItemResult(correct, 2.0, "1 of 1 cases correct"),
        counted(traffic, 3, 2),  # a counted ratio (1.5): not a time, not on the board
        timed(speed, timing(1.5), timing(1.0)),  # geometric mean sqrt(1.5) = 1.2247...
        timed(small, timing(0.8)),
        timed(large, timing(5.0)),  # slower than zero_at: 0 points, but a real, measured ratio
    )


def test_opt_in_ranks_each_measured_time_ratio_lowest_first(tmp_path):
    r = rubric(tmp_path)
    assert r.leaderboard is True
    results = build_results(measured_grade(r), r)
    assert results["leaderboard"] == [
        {"name": "vec time / reference", "value": 1.225, "order": "asc"},
        {"name": "mm small: time / reference", "value": 0.8, "order": "asc"},
        {"name": "mm large: time / reference", "value": 5.0, "order": "asc"},
    ]
    assert json.loads(json.dumps(results))["leaderboard"] == results["leaderboard"]  # plain JSON numbers


def test_without_opt_in_results_json_is_unchanged(tmp_path):
    without = rubric(tmp_path, RUBRIC_TEXT.replace("leaderboard: true\n", ""))
    off = rubric(tmp_path, RUBRIC_TEXT.replace("leaderboard: true", "leaderboard: false"))
    assert without.leaderboard is False and off.leaderboard is False
    results = build_results(measured_grade(without), without)
    assert "leaderboard" not in results
    assert json.dumps(build_results(measured_grade(off), off)) == json.dumps(results)
    on = rubric(tmp_path)  # the opt-in adds the one key and changes nothing else
    with_board = build_results(measured_grade(on), on)
    assert {k: v for k, v in with_board.items() if k != "leaderboard"} == results


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(not_run, id="not run: no GPU"),
        pytest.param(
            lambda item: ItemResult(item, 0.0, "not awarded: wrong", Evidence(cases=())), id="gated"
        ),
        pytest.param(lambda item: timed(item, timing(0.5, wrong="c[3] wrong")), id="wrong timed launch"),
        pytest.param(
            lambda item: ItemResult(item, 0.0, "timing failed: lost", Evidence(cases=())), id="timing failed"
        ),
        pytest.param(lambda item: timed(item, timing(0.01, floor_ms=0.5)), id="under the physical floor"),
        pytest.param(
            lambda item: ItemResult(
                item, 3.0, "grader fault", timed(item, timing(1.0)).evidence, regrade=True
            ),
            id="grader fault",
        ),
    ],
)
def test_an_item_that_measured_nothing_trusted_gives_no_entry(tmp_path, result):
    r = rubric(tmp_path)
    correct, _traffic, speed = r.assignments["vec"]
    small, _large = r.assignments["mm"]
    results = build_results(grade_of(ItemResult(correct, 2.0, "ok"), result(speed)), r)
    assert "leaderboard" not in results  # no entry at all: never a 0 that would top an "asc" board
    results = build_results(grade_of(result(speed), timed(small, timing(2.0))), r)
    assert results["leaderboard"] == [{"name": "mm small: time / reference", "value": 2.0, "order": "asc"}]


def test_grading_without_a_gpu_gives_no_board(course_root, backends):
    rubric_path = course_root / "rubric.yaml"
    rubric_path.write_text(RUBRIC.replace("backend: emulator\n", "backend: emulator\nleaderboard: true\n"))
    course = read_course(course_root)
    assert course.rubric.leaderboard
    grade = pipeline.grade_submission(course.root / "reference", course, backends, seed=3)
    assert [r.not_run for r in grade.items if r.item.metric == "time"] == ["needs a GPU"]
    assert "leaderboard" not in build_results(grade, course.rubric)


@pytest.mark.parametrize("value", ["yes please", "1", '"true"', "[true]", "{on: true}", ""])
def test_a_leaderboard_that_is_not_true_or_false_is_an_error(tmp_path, value):
    with pytest.raises(RubricError) as error:
        rubric(tmp_path, RUBRIC_TEXT.replace("leaderboard: true", f"leaderboard: {value}"))
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'rubric.yaml'}:3: "), message
    assert "leaderboard must be true or false" in message
