from pathlib import Path

import pytest

from autograder.contract import COUNTER_NAMES, FINDING_CHECKS
from autograder.course.rubric import RubricError, load_rubric
from autograder.course.spec import load_specs
from autograder.course.vocabulary import CHECKS, METRICS
from autograder.grading.checks import SCORERS

GROUPS = {"vec": {"aligned": (), "ragged": (), "safety": (), "perf": ()}, "grid2d": {"aligned": ()}}

GOOD = """\
course: c
backend: emulator
limits: {compile_s: 30, case_s: 3, submission_s: 300}
assignments:
  vec:
    items:
      - {check: correctness, cases: aligned, points: 2}
      - {check: traffic, cases: safety, points: 1, metric: global_load_values, full_at: 1.0, zero_at: 4.0}
      - {check: performance, cases: perf, points: 1.5, metric: time, full_at: 1.2, zero_at: 4.0,
         visibility: after_due_date}
  grid2d:
    items:
      - {check: correctness, cases: aligned, points: 3, name: the grid}
"""


def load(tmp_path: Path, text: str, groups=GROUPS):
    path = tmp_path / "rubric.yaml"
    path.write_text(text)
    return load_rubric(path, groups)


def test_loads_items_in_order_with_defaults(tmp_path):
    rubric = load(tmp_path, GOOD)
    assert rubric.backend == "emulator" and rubric.limits.case_s == 3
    vec = rubric.assignments["vec"]
    assert [i.check for i in vec] == ["correctness", "traffic", "performance"]
    assert vec[0].name == "vec correctness (aligned)" and vec[0].visibility == "visible"
    assert vec[0].line == 7
    assert vec[2].points == 1.5 and vec[2].visibility == "after_due_date" and vec[2].zero_at == 4.0
    assert rubric.assignments["grid2d"][0].name == "the grid"
    with pytest.raises(AttributeError):
        vec[0].points = 5  # frozen


@pytest.mark.parametrize(
    ("old", "new", "line", "words"),
    [
        ("points: 2}", "points: 2, pionts: 1}", 7, "unknown key 'pionts'"),
        ("points: 2}", "points: two}", 7, "points must be a number, not 'two'"),
        ("points: 2}", "points: .nan}", 7, "points must be a number"),
        ("check: correctness, cases: aligned", "check: corectness, cases: aligned", 7, "unknown check kind"),
        ("cases: aligned, points: 2", "cases: hidden1, points: 2", 7, "unknown case group 'hidden1'"),
        ("visibility: after_due_date", "visibility: later", 10, "unknown visibility 'later'"),
        ("metric: time, ", "", 9, "has no 'metric'"),
        ("full_at: 1.0, zero_at: 4.0", "full_at: 4.0, zero_at: 1.0", 8, "full_at < zero_at"),
        ("points: 3, name", "points: 3, metric: time, name", 13, "'metric' only applies"),
        ("case_s: 3", "case_s: -3", 3, "limits.case_s must be positive"),
        ("course: c", "course: c\ncolor: red", 2, "unknown key 'color' in the rubric"),
        ("  grid2d:", "  grid3d:", 11, "unknown assignment 'grid3d'"),
        ("backend: emulator", "backend: tpu", 2, "unknown backend 'tpu'"),
        ("metric: global_load_values", "metric: global_loads", 8, "unknown traffic metric 'global_loads'"),
        ("metric: global_load_values", "metric: time", 8, "unknown traffic metric 'time'"),
        ("metric: time", "metric: seconds", 9, "unknown performance metric 'seconds'"),
    ],
)
def test_errors_name_file_and_line(tmp_path, old, new, line, words):
    assert old in GOOD
    with pytest.raises(RubricError) as error:
        load(tmp_path, GOOD.replace(old, new))
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'rubric.yaml'}:{line}: "), message
    assert words in message


def test_duplicate_item_names_are_an_error(tmp_path):
    text = GOOD.replace("name: the grid", "name: g")
    text += "      - {check: correctness, cases: aligned, points: 1, name: g}\n"
    with pytest.raises(RubricError, match=r":14: two items are named 'g'"):
        load(tmp_path, text)


def test_item_names_are_unique_across_assignments(tmp_path):
    # the class table and a TA's reading of results.json key items by name
    text = GOOD.replace("name: the grid", "name: vec correctness (aligned)")
    with pytest.raises(RubricError, match=r":13: two items are named 'vec correctness \(aligned\)'"):
        load(tmp_path, text)


def test_missing_assignment_is_an_error(tmp_path):
    groups = {**GROUPS, "window_sum": {"aligned": ()}}
    with pytest.raises(RubricError, match=r"rubric.yaml:5: no rubric entry for assignment\(s\) window_sum"):
        load(tmp_path, GOOD, groups)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "the file is empty"),
        ("a: [", "not valid YAML"),
        ("- 1\n", "the rubric must be a mapping"),
        ("course: c\n", "has no 'assignments'"),
        ("assignments:\n  vec: {items: []}\n", "non-empty list"),
    ],
)
def test_malformed_files(tmp_path, text, words):
    with pytest.raises(RubricError, match=words):
        load(tmp_path, text, None)


def test_missing_file(tmp_path):
    with pytest.raises(RubricError, match="cannot read"):
        load_rubric(tmp_path / "nope.yaml")


def test_the_course_rubric_loads_against_its_specs():
    root = Path(__file__).resolve().parents[2]
    specs = load_specs(root)
    rubric = load_rubric(root / "rubric.yaml", {name: spec.cases for name, spec in specs.items()})
    assert set(rubric.assignments) == set(specs)


def test_one_vocabulary():
    """Each word defined once, and the definitions agree with one another."""
    assert tuple(SCORERS) == CHECKS
    assert set(FINDING_CHECKS.values()) <= set(CHECKS)
    assert set(METRICS) <= set(CHECKS) and set(METRICS["traffic"]) == set(COUNTER_NAMES)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("{check: resources, cases: safety, points: 1}", "has no 'metric'"),
        ("{check: resources, cases: safety, points: 1, metric: registers}", "resources metric"),
        ("{check: resources, cases: safety, points: 1, metric: occupancy}", "has no 'at_least'"),
        (
            "{check: resources, cases: safety, points: 1, metric: occupancy, at_least: 50}",
            "0 < at_least <= 1",
        ),
        (
            "{check: resources, cases: safety, points: 1, metric: spills, at_least: 0.5}",
            "occupancy metric only",
        ),
        ("{check: bounds, cases: safety, points: 1, at_least: 0.5}", "only applies to resources items"),
    ],
)
def test_a_malformed_resources_item_is_named_with_its_line(tmp_path, item, message):
    path = tmp_path / "rubric.yaml"
    path.write_text(f"course: c\nbackend: auto\nassignments:\n  a:\n    items:\n      - {item}\n")
    with pytest.raises(RubricError, match=message):
        load_rubric(path, {"a": {"safety": ()}})
