"""Authoring: a reference's markers → its starter, every marker error named by file and line; the
committed starters are exactly what their references generate; ``starters --check`` catches a
starter edited by hand; ``new`` scaffolds a loadable assignment and refuses what it must."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from autograder import cli
from autograder.course.authoring import (
    AuthoringError,
    assignment_names,
    generated_starter,
    scaffold,
    solution_regions,
    starter_text,
    with_rubric_entry,
)
from autograder.course.folder import read_course

ROOT = Path(__file__).resolve().parents[2]

REFERENCE = """\
// k: y[0] = N.
#define N 4
// BEGIN SOLUTION
#define FAST 1
// END SOLUTION

__global__ void k(float* y) {
    // BEGIN SOLUTION
    y[0] = N;
    // END SOLUTION
    // BEGIN PROMPT
    // // TODO: write y[0].
    //
    // int i = 0;
    // END PROMPT
}
"""

STARTER = """\
// k: y[0] = N.
#define N 4

__global__ void k(float* y) {
    // TODO: write y[0].

    int i = 0;
}
"""


def run(*args):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


def test_solutions_go_and_prompts_are_uncommented_once():
    assert starter_text(REFERENCE) == STARTER


def test_solution_regions_are_the_removed_text_in_order():
    assert solution_regions(REFERENCE) == ["#define FAST 1\n", "    y[0] = N;\n"]


def test_marker_lines_may_be_indented_and_spaced_freely():
    reference = "a\n\t//BEGIN   SOLUTION \nb\n  //  END SOLUTION\n"
    reference += "    // BEGIN PROMPT\n        //   c\n// END PROMPT\n"
    assert starter_text(reference) == "a\n          c\n"
    assert solution_regions(reference) == ["b\n"]


def test_line_endings_are_kept():
    reference = (
        "a\r\n// BEGIN SOLUTION\r\nb\r\n// END SOLUTION\r\n// BEGIN PROMPT\r\n// c\r\n//\r\n// END PROMPT\r\n"
    )
    assert starter_text(reference) == "a\r\nc\r\n\r\n"


SOLVED = "// BEGIN SOLUTION\nx;\n// END SOLUTION\n"
MALFORMED = {
    "unclosed block": ("a;\n// BEGIN SOLUTION\nb;\n", 2, "never closed"),
    "unclosed prompt": (SOLVED + "// BEGIN PROMPT\n// b;\n", 4, "never closed"),
    "nested blocks": (
        "// BEGIN SOLUTION\n// BEGIN PROMPT\n// END PROMPT\n// END SOLUTION\n",
        2,
        "do not nest",
    ),
    "END without BEGIN": ("a;\n// END SOLUTION\n", 2, "without a // BEGIN SOLUTION"),
    "END of another block": ("// BEGIN SOLUTION\nb;\n// END PROMPT\n", 3, "expected // END SOLUTION"),
    "PROMPT line not a comment": (
        SOLVED + "// BEGIN PROMPT\n// ok;\nint x;\n// END PROMPT\n",
        6,
        "// comment",
    ),
    "empty PROMPT line": (SOLVED + "// BEGIN PROMPT\n\n// END PROMPT\n", 5, "// comment"),
    "misspelt marker": (SOLVED + "// BEGIN SOLUTIONS\n", 4, "not a marker"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_every_marker_error_names_the_file_and_line(case):
    text, line, phrase = MALFORMED[case]
    for parse in (starter_text, solution_regions):
        with pytest.raises(AuthoringError, match=re.escape(phrase)) as raised:
            parse(text, "reference/k.cu")
        assert str(raised.value).startswith(f"reference/k.cu:{line}: ")


def test_a_reference_without_a_solution_block_has_no_starter():
    with pytest.raises(AuthoringError, match="no // BEGIN SOLUTION block") as raised:
        starter_text("__global__ void k() {}\n", "reference/k.cu")
    assert str(raised.value).startswith("reference/k.cu: ")
    assert solution_regions("__global__ void k() {}\n") == []


@pytest.mark.parametrize("name", assignment_names(ROOT))
def test_each_committed_starter_is_what_its_reference_generates(name):
    """Edit reference/NAME.cu and run `autograder starters NAME`; never edit a starter by hand."""
    assert (ROOT / "starter" / f"{name}.cu").read_text() == generated_starter(ROOT, name)


def test_the_guides_marker_example_is_what_the_code_does():
    examples = re.findall(r"^```cuda\n(.*?)^```$", (ROOT / "docs/authoring.md").read_text(), re.M | re.S)
    reference, starter = examples[:2]
    assert starter_text(reference) == starter


@pytest.fixture
def course_copy(tmp_path) -> Path:
    """This course's assignments, references and starters, in a scratch folder."""
    for folder in ("assignments", "reference", "starter"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_starters_check_catches_a_starter_edited_by_hand(course_copy):
    edited = course_copy / "starter/window_sum.cu"
    edited.write_text(edited.read_text() + "// a hint, added by hand\n")
    (course_copy / "starter/reduction.cu").unlink()
    before = edited.read_text()
    outcome = run("starters", "--check", "--course", course_copy)
    assert outcome.exit_code == 1, outcome.output
    named = sorted(re.findall(r"^starter/(\w+)\.cu ", outcome.output, re.M))
    assert named == ["reduction", "window_sum"], outcome.output
    assert edited.read_text() == before and not (course_copy / "starter/reduction.cu").exists()
    assert run("starters", "--check", "vector_add", "--course", course_copy).exit_code == 0


def test_starters_regenerates_what_differs(course_copy):
    (course_copy / "starter/window_sum.cu").write_text("stale\n")
    outcome = run("starters", "--course", course_copy)
    assert outcome.exit_code == 0, outcome.output
    assert "wrote starter/window_sum.cu" in outcome.output and outcome.output.count("wrote") == 1
    assert run("starters", "--check", "--course", course_copy).exit_code == 0


def test_starters_refuses_unknown_names_and_broken_references(course_copy):
    outcome = run("starters", "nope", "--course", course_copy)
    assert outcome.exit_code == 2 and "no assignment nope" in outcome.output
    (course_copy / "reference/vector_add.cu").write_text("// BEGIN SOLUTION\nx;\n")
    outcome = run("starters", "--course", course_copy)
    assert outcome.exit_code == 1 and "vector_add.cu:1: // BEGIN SOLUTION is never closed" in outcome.output


def test_new_scaffolds_an_assignment_the_course_loads(course_root):
    rubric_before = (course_root / "rubric.yaml").read_text()
    outcome = run("new", "relu", "--kernel", "relu_kernel", "--course", course_root)
    assert outcome.exit_code == 0, outcome.output
    assert "wrote reference/relu.cu" in outcome.output and "autograder starters relu" in outcome.output
    course = read_course(course_root)
    assert course.specs["relu"].kernel == "relu_kernel"
    items = [(item.check, item.cases) for item in course.rubric.assignments["relu"]]
    assert items == [
        ("correctness", "aligned"),
        ("correctness", "ragged"),
        ("bounds", "safety"),
        ("barriers", "safety"),
    ]
    assert (course_root / "rubric.yaml").read_text().startswith(rubric_before)
    reference = (course_root / "reference/relu.cu").read_text()
    assert "__global__ void relu_kernel(" in reference
    assert (course_root / "starter/relu.cu").read_text() == starter_text(reference)
    assert (course_root / "assignments/relu/README.md").read_text().startswith("# relu")


def test_the_scaffold_is_one_thread_per_element_with_a_guard_as_the_guide_says(course_root):
    guide = " ".join((ROOT / "docs/authoring.md").read_text(encoding="utf-8").split())
    assert "a kernel `y[i] = 2 x[i]` with one thread per element" in guide
    scaffold(course_root, "relu")
    (solution,) = solution_regions((course_root / "reference/relu.cu").read_text())
    assert "if (i < n)" in solution and not re.search(r"\b(for|while)\b", solution), solution


@pytest.mark.parametrize(
    "name", ["vec", "Vec", "grid_2d", "2x", "a-b", "my kernel", "", "class", "new", "int"]
)
def test_new_refuses_names_the_course_has_and_names_that_are_not_identifiers(course_root, name):
    rubric_before = (course_root / "rubric.yaml").read_text()
    with pytest.raises(AuthoringError, match=r"already has|not a valid assignment name"):
        scaffold(course_root, name)
    assert (course_root / "rubric.yaml").read_text() == rubric_before


def test_new_refuses_an_invalid_kernel_name(course_root):
    with pytest.raises(AuthoringError, match="not a valid kernel name"):
        scaffold(course_root, "relu", kernel="relu()")


def test_new_overwrites_nothing(course_root):
    (course_root / "reference/relu.cu").write_text("mine\n")
    rubric_before = (course_root / "rubric.yaml").read_text()
    outcome = run("new", "relu", "--course", course_root)
    assert outcome.exit_code == 1 and "will not overwrite" in outcome.output
    assert (course_root / "reference/relu.cu").read_text() == "mine\n"
    assert not (course_root / "assignments/relu").exists()
    assert (course_root / "rubric.yaml").read_text() == rubric_before


RUBRIC = """\
# the course's rubric
course: c
assignments:   # one entry each
  a:
    items:
      - {check: correctness, cases: aligned,
         points: 4}
      # - {check: bounds, cases: safety, points: 1}   (off this term)

# after the assignments
leaderboard: false"""


def test_the_rubric_entry_is_added_after_the_last_assignment_keeping_comments():
    text = with_rubric_entry(RUBRIC, "b")
    assert text.startswith(RUBRIC[: RUBRIC.index("\n\n# after")])
    assert text.endswith("\n\n# after the assignments\nleaderboard: false")
    assert "(off this term)\n  b:\n    items:\n" in text
    loaded = yaml.safe_load(text)
    assert list(loaded["assignments"]) == ["a", "b"] and loaded["leaderboard"] is False
    assert len(loaded["assignments"]["b"]["items"]) == 4


def test_a_rubric_without_a_trailing_newline_or_with_the_entry_is_handled():
    text = with_rubric_entry(
        "assignments:\n  a:\n    items: [{check: correctness, cases: aligned, points: 1}]", "b"
    )
    assert list(yaml.safe_load(text)["assignments"]) == ["a", "b"]
    with pytest.raises(AuthoringError, match=r"rubric\.yaml:4: already has an entry for 'a'"):
        with_rubric_entry(RUBRIC, "a")
    with pytest.raises(AuthoringError, match="add the new entry by hand"):
        with_rubric_entry("assignments: {a: {items: []}}\n", "b")
