"""results.json as Gradescope renders it: Markdown, fenced student text, extra_data, not-run items."""

import dataclasses
import importlib.metadata
import json
import re

from click.testing import CliRunner

from autograder import cli
from autograder.grading import results as gradescope
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.results import build_results, fallback_results

from .fake_backend import open_fake_backends

ESCAPE = "ok\n```\n# you got full marks\n![x](http://evil.example/x.png)\n````\nstill inside"


def _blocks_close_only_at_the_end(markdown: str) -> bool:
    """CommonMark: a fence of N backticks closes only on a line of >= N backticks and nothing else."""
    lines = markdown.splitlines()
    opening = lines[0]
    n = len(opening)
    assert set(opening) == {"`"} and n >= 3
    closers = [i for i, line in enumerate(lines[1:], 1) if re.fullmatch(rf" {{0,3}}`{{{n},}}\s*", line)]
    return closers == [len(lines) - 1]


def test_a_student_fence_cannot_break_out_of_its_block():
    block = gradescope.fenced(ESCAPE)
    assert _blocks_close_only_at_the_end(block)
    assert block.startswith("`````\n") and ESCAPE in block  # longer than the longest run (4), words kept
    assert gradescope.fenced("plain") == "```\nplain\n```" and gradescope.fenced("") == ""


def test_items_are_markdown_code_blocks(course, backends):
    from autograder.grading import pipeline

    graded = pipeline.grade_submission(course.root / "reference", course, backends, seed=3)
    hostile = dataclasses.replace(graded.items[0], output=ESCAPE)
    graded = dataclasses.replace(graded, items=(hostile, *graded.items[1:]))
    results = build_results(graded, course.rubric)
    assert results["output_format"] == "md"
    first = results["tests"][0]["output"]
    assert _blocks_close_only_at_the_end(first) and ESCAPE in first
    for test, item in zip(results["tests"][1:], graded.items[1:], strict=True):
        assert _blocks_close_only_at_the_end(test["output"]) and item.output in test["output"]


def test_extra_data_has_backend_and_version_never_the_seed(course, backends):
    from autograder.grading import pipeline

    graded = pipeline.grade_submission(course.root / "reference", course, backends, seed=918273645)
    results = build_results(graded, course.rubric)
    version = importlib.metadata.version("cuda-autograder")
    assert results["extra_data"] == {"backend": "emulator", "grader_version": version}
    assert "918273645" not in json.dumps(results)


def test_not_run_items_are_announced_at_the_top(course):
    items = course.rubric.assignments["vec"]
    grade = Grade(
        items=(
            ItemResult(items[0], items[0].points, "correct"),
            ItemResult(items[1], 0.0, "not run: needs a GPU", regrade=True, not_run="needs a GPU"),
            ItemResult(items[2], 0.0, "not run: needs a GPU", regrade=True, not_run="needs a GPU"),
        ),
        backend="emulator",
        seed=1,
        notes=("foo.zip was not unpacked: ```",),
    )
    output = build_results(grade, course.rubric)["output"]
    pending = items[1].points + items[2].points
    first = output.splitlines()[0]
    assert first.startswith(f"**{pending:g} points could not be graded here (needs a GPU)")
    assert "they show 0 until then" in first
    assert "````\nfoo.zip was not unpacked: ```\n````" in output  # notes quote file names: fenced


def test_fallback_results_are_markdown_too(course):
    results = fallback_results(course.rubric, "RuntimeError: ``` boom", 1)
    assert results["output_format"] == "md" and "grader_version" in results["extra_data"]
    assert all(_blocks_close_only_at_the_end(t["output"]) for t in results["tests"])


def test_grade_prints_one_line_per_item_without_a_terminal(course_root, tmp_path, monkeypatch):
    monkeypatch.setattr(cli.shared, "open_backends", open_fake_backends)
    results = tmp_path / "results.json"
    args = ["grade", str(course_root / "reference"), "--course", str(course_root), "--results", str(results)]
    outcome = CliRunner().invoke(cli.main, args)  # CliRunner's stdout is not a tty
    assert outcome.exit_code == 0, outcome.output
    lines = outcome.output.splitlines()
    assert len([line for line in lines if re.match(r"(ok |-- |\?\? )", line)]) == 7
