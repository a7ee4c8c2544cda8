import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder import cli
from autograder.backends import compiler
from autograder.grading import pipeline

from .fake_backend import FakeBackend, open_fake_backends


@pytest.fixture(autouse=True)
def fake_backends(monkeypatch):
    monkeypatch.setattr(cli.shared, "open_backends", open_fake_backends)
    monkeypatch.setattr(
        cli.shared, "select_backend", lambda name, compile_s=60, emulator_mb=None: FakeBackend(name)
    )


def run(*args):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


def test_grade_writes_results_and_report(course_root, tmp_path):
    results, report = tmp_path / "out/results.json", tmp_path / "out/report"
    outcome = run(
        "grade",
        course_root / "reference",
        "--course",
        course_root,
        "--results",
        results,
        "--report",
        report,
        "--seed",
        4,
    )
    assert outcome.exit_code == 0, outcome.output
    assert "10 / 10 points graded here; 1 more point is graded later (needs a GPU)" in outcome.output
    assert json.loads(results.read_text())["score"] == 10
    assert json.loads((tmp_path / "out/report.json").read_text())["seed"] == 4
    assert (tmp_path / "out/report.md").exists()


def test_a_failing_report_costs_no_grades(course_root, tmp_path, monkeypatch):
    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(cli.grading, "write_report", broken)
    results = tmp_path / "results.json"
    outcome = run(
        "grade",
        course_root / "reference",
        "--course",
        course_root,
        "--results",
        results,
        "--report",
        tmp_path / "report",
    )
    assert outcome.exit_code == 0 and "warning: the TA report failed: OSError: disk full" in outcome.output
    assert json.loads(results.read_text())["score"] == 10


def test_grade_with_a_broken_rubric_still_writes_results(course_root, tmp_path):
    (course_root / "rubric.yaml").write_text("assignments:\n  vec:\n    items:\n      - {check: speed}\n")
    results = tmp_path / "results.json"
    outcome = run("grade", course_root / "reference", "--course", course_root, "--results", results)
    assert outcome.exit_code == 2
    data = json.loads(results.read_text())
    assert data["score"] == 0 and data["tests"] == []
    assert "rubric.yaml:2: no rubric entry for assignment(s) grid2d" in data["output"]


def test_a_grader_crash_scores_every_item_zero_with_the_reason(course_root, tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise MemoryError("grader ran out of memory")

    monkeypatch.setattr(pipeline, "grade_submission", crash)
    results = tmp_path / "results.json"
    outcome = run("grade", course_root / "reference", "--course", course_root, "--results", results)
    assert outcome.exit_code == 2
    data = json.loads(results.read_text())
    assert len(data["tests"]) == 7 and all(t["score"] == 0 for t in data["tests"])
    assert all("MemoryError: grader ran out of memory" in t["output"] for t in data["tests"])


def test_selfcheck_passes_on_a_sound_course(course_root):
    outcome = run("selfcheck", "--course", course_root)
    assert outcome.exit_code == 0, outcome.output
    assert "ok   vec                  reference 7 / 8  (not run: performance: needs a GPU)" in outcome.output
    assert "ok   grid2d               starter   0 / 3" in outcome.output


def test_selfcheck_fails_when_the_reference_is_wrong_or_the_starter_scores(course_root):
    (course_root / "reference/grid2d.cu").write_text("def grid2d(ctx, x, y, r):\n    y[:] = 3 * x\n")
    (course_root / "starter/vec.cu").write_text((course_root / "reference/vec.cu").read_text())
    outcome = run("selfcheck", "--course", course_root)
    assert outcome.exit_code == 1
    assert "FAIL grid2d               reference 0 / 3" in outcome.output
    assert "FAIL vec                  starter   7 / 8" in outcome.output


def test_selfcheck_names_a_bad_rubric_line_without_a_traceback(course_root):
    rubric = course_root / "rubric.yaml"
    rubric.write_text(rubric.read_text().replace("points: 3", "points: x"))
    outcome = run("selfcheck", "--course", course_root)
    assert outcome.exit_code == 1 and "rubric.yaml:17: points must be a number, not 'x'" in outcome.output
    assert "Traceback" not in outcome.output


def test_parse_case():
    assert cli.profiling.parse_case("T=32,n=70") == {"T": 32, "n": 70}
    assert cli.profiling.parse_case(None) is None
    with pytest.raises(Exception, match="not k=v"):
        cli.profiling.parse_case("T")


def test_check_prints_every_items_feedback_and_fails_an_incomplete_kernel(course_root):
    good = run("check", course_root / "reference/vec.cu", "--course", course_root)
    assert good.exit_code == 0, good.output
    assert "vec correctness" in good.output and "points graded here, on the" in good.output
    stub = run("check", course_root / "starter/vec.cu", "--course", course_root)
    assert stub.exit_code == 1 and "never written" in stub.output


# a correct vec that loads 1.5 times the reference's values (traffic: 0.7075 of 1 point) and is
# slow on its n = 70 cases
HEAVY_VEC = """
import time

def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 3 * n)
    if n == 70:
        time.sleep(0.05)
"""


def test_check_shows_each_item_as_it_finishes_on_a_terminal_and_the_slowest_case(
    course_root, tmp_path, monkeypatch
):
    kernel = tmp_path / "vec.cu"
    kernel.write_text(HEAVY_VEC)
    piped = run("check", kernel, "--course", course_root)
    assert not any(line.startswith(("ok ", "-- ", "?? ")) for line in piped.output.splitlines())
    monkeypatch.setattr(cli.grading, "stdout_is_terminal", lambda: True)
    shown = run("check", kernel, "--course", course_root)
    progress = [line for line in shown.output.splitlines() if line.startswith(("ok ", "-- ", "?? "))]
    assert progress == [
        "ok     2 / 2   vec correctness (aligned)",
        "ok     2 / 2   vec correctness (ragged)",
        "ok     1 / 1   vec bounds (safety)",
        "ok     1 / 1   vec barriers (safety)",
        "--  0.71 / 1   vec traffic (safety)",
        "??     - / 1   vec performance (perf)",
    ]
    assert shown.output.index(progress[-1]) < shown.output.index("vec correctness (aligned)\n    1 of 1 case")
    slowest = shown.output.splitlines()[-1]
    assert slowest.startswith("slowest case: n=70, T=32 (") and slowest.endswith(" s on the emulator backend")
    assert float(slowest.split("), ")[1].split(" s ")[0]) >= 0.05


def test_scores_have_two_decimals_and_points_not_graded_here_are_apart(course_root, tmp_path):
    kernel = tmp_path / "submission/vec.cu"
    kernel.parent.mkdir()
    kernel.write_text(HEAVY_VEC)
    checked = run("check", kernel, "--course", course_root)
    assert "0.71 / 1  vec traffic (safety)" in checked.output and "0.7075" not in checked.output
    assert "- / 1  vec performance (perf)" in checked.output
    assert (
        "6.71 / 7 points graded here, on the emulator backend; 1 more point is graded later (needs a GPU)"
        in checked.output
    )
    results = tmp_path / "results.json"
    graded = run("grade", kernel.parent, "--course", course_root, "--assignment", "vec", "--results", results)
    assert "--  0.71 / 1   vec traffic (safety)" in graded.output
    assert (
        f"6.71 / 7 points graded here; 1 more point is graded later (needs a GPU) -> {results}"
        in graded.output
    )


def test_check_names_the_expected_files_for_an_unknown_one(course_root, tmp_path):
    stray = tmp_path / "vector.cu"
    stray.write_text("")
    outcome = run("check", stray, "--course", course_root)
    assert outcome.exit_code == 2 and "expected one of: vec.cu, grid2d.cu" in outcome.output


SIGTERM_DURING_GRADING = """
import os, signal, sys, time
sys.path.insert(0, {repo!r})
from autograder import cli
from autograder.grading import pipeline
from tests.unit.fake_backend import open_fake_backends

def terminated(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # what Gradescope sends when its time limit is up
    time.sleep(30)

cli.shared.open_backends = open_fake_backends
pipeline.grade_submission = terminated
cli.main(["grade", {submission!r}, "--course", {course!r}, "--results", {results!r}])
"""


def test_a_sigterm_while_grading_still_writes_results(course_root, tmp_path):
    results = tmp_path / "results.json"
    script = SIGTERM_DURING_GRADING.format(
        repo=str(Path(__file__).resolve().parents[2]),
        course=str(course_root),
        submission=str(course_root / "reference"),
        results=str(results),
    )
    run_ = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run_.returncode == 2, run_.stderr
    data = json.loads(results.read_text())
    assert len(data["tests"]) == 7 and all(t["score"] == 0 and "regrade" in t["tags"] for t in data["tests"])
    assert "SIGTERM" in data["output"]


def test_profile_names_a_bad_case_without_a_traceback(course_root):
    outcome = run(
        "profile",
        course_root / "reference",
        "--assignment",
        "vec",
        "--case",
        "m=3,T=32",
        "--course",
        course_root,
    )
    assert outcome.exit_code == 1 and isinstance(outcome.exception, SystemExit)
    assert "unknown parameter 'n'" in outcome.output


@pytest.mark.parametrize(("text", "words"), [("{", "not JSON"), ('{"items": []}', "not a TA report")])
def test_table_names_a_file_that_is_no_report(tmp_path, text, words):
    bad = tmp_path / "results.json"
    bad.write_text(text)
    outcome = run("table", bad)
    assert outcome.exit_code == 1 and isinstance(outcome.exception, SystemExit), outcome.exception
    assert f"{bad}: {words}" in outcome.output


def test_grade_names_an_unknown_assignment(course_root, tmp_path):
    results = tmp_path / "results.json"
    outcome = run(
        "grade",
        course_root / "reference",
        "--course",
        course_root,
        "--results",
        results,
        "--assignment",
        "vector",
    )
    assert outcome.exit_code == 2
    output = json.loads(results.read_text())["output"]
    assert "unknown assignment 'vector' (the rubric has: vec, grid2d)" in output


def test_selfcheck_names_an_unknown_assignment(course_root):
    outcome = run("selfcheck", "--course", course_root, "--assignment", "vector")
    assert outcome.exit_code == 2 and "unknown assignment 'vector'" in outcome.output


def test_an_unpinned_nvrtc_is_named_on_the_graders_log_not_to_the_student(course_root, tmp_path, monkeypatch):
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (13, 0))
    results = tmp_path / "results.json"
    outcome = CliRunner().invoke(
        cli.main,
        ["grade", str(course_root / "reference"), "--course", str(course_root), "--results", str(results)],
    )
    assert "warning: NVRTC 13.0 compiles here, the course pins 13.5" in outcome.stderr
    assert "NVRTC" not in results.read_text()
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: compiler.PINNED_NVRTC)
    assert compiler.nvrtc_problem() is None


NEEDS_A_COURSE = [
    ["check", "kernel.cu"],
    ["profile", "kernel.cu", "--assignment", "vec"],
    ["selfcheck"],
    ["handout", "vec"],
    ["gradescope", "vec"],
    ["handout-profiles"],
    ["new", "vec2"],
    ["starters"],
    ["batch", ".", "--out", "graded"],
    ["serve", "--token-file", "kernel.cu"],
]


@pytest.mark.parametrize("args", NEEDS_A_COURSE, ids=lambda a: a[0])
def test_a_command_run_outside_a_course_says_where_it_looked_and_how_to_name_one(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.shared, "CHECKOUT", tmp_path / "site-packages")  # installed, not a checkout
    monkeypatch.delenv("AUTOGRADER_COURSE", raising=False)
    (tmp_path / "kernel.cu").write_text("__global__ void vec() {}\n")
    outcome = CliRunner().invoke(cli.main, args)
    assert outcome.exit_code == 1 and isinstance(outcome.exception, SystemExit), outcome.output
    (line,) = outcome.output.splitlines()
    assert f"no course found at {tmp_path} or {tmp_path / 'site-packages'} or /autograder/source" in line
    assert line.endswith("--course DIR or AUTOGRADER_COURSE=DIR")
    named = CliRunner().invoke(cli.main, args, env={"AUTOGRADER_COURSE": str(tmp_path)})
    assert f"no course found at {tmp_path} (no assignments/ there)" in named.output


def test_grade_outside_a_course_says_so_in_results_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.shared, "CHECKOUT", tmp_path / "site-packages")
    monkeypatch.delenv("AUTOGRADER_COURSE", raising=False)
    outcome = run("grade", tmp_path, "--results", tmp_path / "results.json")
    assert outcome.exit_code == 2
    output = json.loads((tmp_path / "results.json").read_text())["output"]
    assert "no course found at" in output and "--course DIR or AUTOGRADER_COURSE=DIR" in output


def test_every_command_a_cli_module_defines_is_one_of_autograders_and_loads_only_when_asked():
    """``cli.COMMANDS`` names each command's module: a command defined but not listed would be
    missing from ``autograder``; ``grade`` loads neither the batch nor the service."""
    import importlib
    import pkgutil

    import click

    defined = {
        command.name
        for module in pkgutil.iter_modules(cli.__path__)
        for command in vars(importlib.import_module(f"autograder.cli.{module.name}")).values()
        if isinstance(command, click.Command) and not isinstance(command, click.Group)
    }
    context = click.Context(cli.main)
    assert set(cli.main.list_commands(context)) == defined
    assert all(cli.main.get_command(context, name).name == name for name in defined)
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from autograder.cli import main; main.get_command(None, 'grade');"
            " print(sorted(m for m in sys.modules if m.startswith('autograder.cli.')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "whole_class" not in loaded and "service" not in loaded and "grading" in loaded


def test_a_command_freezes_what_the_process_holds_as_it_exits():
    """Python's exit collects cyclic garbage over every object alive: a command's process
    freezes them first (``cli.main``). An exit handler registered before the command runs after
    the command's own and reads the frozen count."""
    script = (
        "import atexit, gc, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from autograder.cli import main\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count()))\n"
        "main(['grade', '--help'])\n"
    )
    run_ = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run_.returncode == 0, run_.stderr
    assert int(run_.stdout.split()[-1]) > 1000
