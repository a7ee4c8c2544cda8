"""The ``autograder`` command: grade a submission, check the course, profile a kernel."""

from __future__ import annotations

import json
import signal
import sys
import time
import traceback
from pathlib import Path

import click

from autograder import class_table, discovery, gradescope_zip, pipeline, policy
from autograder.backends import NAMES, open_backends, select_backend
from autograder.backends.base import BackendError
from autograder.cases import find_case, prepare
from autograder.compiler import nvrtc_problem
from autograder.emulator.profile import profile_data, profile_table
from autograder.feedback import for_student
from autograder.model import Course, ItemResult, read_course
from autograder.report import write_report
from autograder.results import build_results, fallback_results, write_results
from autograder.rubric import RubricError
from autograder.spec import SpecError


def default_course_root() -> Path:
    """The first with a rubric of: the working directory, this checkout, ``/autograder/source``."""
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[1], Path("/autograder/source")):
        if (candidate / "rubric.yaml").is_file():
            return candidate
    return Path.cwd()


def course_options(command):
    """``--course`` and ``--backend``, shared by the grading commands."""
    command = click.option(
        "--backend",
        type=click.Choice(NAMES),
        default=None,
        help="Where kernels run (default: the rubric's `backend`, normally auto = GPU if PyCUDA finds one).",
    )(command)
    return course_option(command)


course_option = click.option(
    "--course",
    "course_root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar="AUTOGRADER_COURSE",
    show_envvar=True,
    help="Course root holding assignments/, rubric.yaml, reference/ (default: ./, the checkout, "
    "or /autograder/source).",
)


@click.group()
@click.version_option(package_name="cuda-autograder")
def main():
    """Grade CUDA kernel assignments on a GPU (PyCUDA) or on the PTX emulator."""


@main.command()
@click.argument("submission", type=click.Path(path_type=Path))  # missing: graded as empty, 0 with a reason
@course_options
@click.option(
    "--rubric",
    "rubric_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The rubric (default: COURSE/rubric.yaml).",
)
@click.option(
    "--results",
    "results_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("results.json"),
    show_default=True,
    help="Where to write results.json.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the TA report to REPORT.md and REPORT.json.",
)
@click.option("--seed", type=int, default=None, help="Secret seed of the inputs (default: fresh each run).")
@click.option(
    "--assignment",
    "assignments",
    multiple=True,
    help="Grade this assignment (repeatable; default: those whose .cu is in SUBMISSION).",
)
@click.option(
    "--sanitize",
    is_flag=True,
    help="GPU only: also run the bounds and barriers items' cases under compute-sanitizer "
    "(a cross-check, unscored).",
)
def grade(
    submission, course_root, backend, rubric_path, results_path, report_path, seed, assignments, sanitize
):
    """Grade SUBMISSION (a directory of <assignment>.cu files) into results.json.

    A results.json is written whatever happens; if the grader itself fails, every item
    scores 0 with the reason and the exit status is 2.
    """
    started = time.monotonic()
    rubric = None
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        course = read_course(course_root or default_course_root(), rubric_path)
        rubric = course.rubric
        with backends_for(course, backend) as backends:
            graded = pipeline.grade_submission(
                submission, course, backends, seed, list(assignments) or None, progress_printer(), sanitize
            )
        results = build_results(graded, rubric)
    except BaseException as e:  # KeyboardInterrupt, SystemExit, Terminated too: results.json comes first
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not stop this write
        reason = "".join(traceback.format_exception_only(e)).strip()
        write_results(results_path, fallback_results(rubric, reason, time.monotonic() - started))
        click.echo(f"grading failed: {reason}\n(results.json written with every item at 0)", err=True)
        sys.exit(2)
    write_results(results_path, results)
    if report_path:
        optional("the TA report", write_report, report_path, graded, submission)
    total = sum(r.score for r in graded.items)
    click.echo(f"{total:g} / {sum(r.item.points for r in graded.items):g} points -> {results_path}")


class Terminated(BaseException):
    """SIGTERM (Gradescope's time limit): a BaseException, so no ``except Exception`` swallows it."""


def raise_terminated(signum, frame):
    raise Terminated(
        f"the grader was stopped by {signal.Signals(signum).name} "
        "(the autograder's time limit on Gradescope?)"
    )


def optional(what: str, step, *args) -> None:
    """Run a step the grades do not depend on; its failure is a warning, never a lost grade."""
    try:
        step(*args)
    except Exception as e:
        click.echo(f"warning: {what} failed: {type(e).__name__}: {e}", err=True)


def course_or_usage_error(root: Path | None) -> Course:
    """The course, or a clean error naming the bad file and line."""
    try:
        return read_course(root or default_course_root())
    except (RubricError, SpecError) as e:
        raise click.ClickException(str(e)) from e


def backends_for(course: Course, name: str | None):
    """The backends ``--backend`` (default: the rubric's) names, within the rubric's limits."""
    optional("the compiler check", warn_unpinned_compiler)
    limits = course.rubric.limits
    return open_backends(name or course.rubric.backend, limits.compile_s, limits.emulator_mb)


def warn_unpinned_compiler() -> None:
    """On stderr (the instructor's log, not the student's feedback): an NVRTC other than the pinned one."""
    problem = nvrtc_problem()
    if problem:
        click.echo(f"warning: {problem}", err=True)


def progress_printer():
    """One line per item as it finishes, on stdout whatever it is (Gradescope shows it to instructors)."""

    def show(result: ItemResult) -> None:
        mark = "ok " if result.passed else ("?? " if result.regrade else "-- ")
        click.echo(f"{mark}{result.score:>5g} / {result.item.points:<3g} {result.item.name}")

    return show


@main.command()
@click.argument(
    "reports", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the table as CSV.",
)
def table(reports, csv_path):
    """The class table from TA reports (REPORT.json files): one row per submission, one column per item."""
    try:
        columns, rows = class_table.class_rows(list(reports))
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    if csv_path:
        class_table.write_csv(csv_path, columns, rows)
    click.echo(class_table.markdown(columns, rows), nl=False)


@main.command()
@click.argument("kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@course_options
@click.option(
    "--assignment",
    default=None,
    help="The assignment KERNEL is for (default: the one its file name, or the __global__ kernel it "
    "defines, says).",
)
def check(kernel, course_root, backend, assignment):
    """Grade one kernel file (e.g. window_sum.cu) as the grader will, and print all the feedback.

    For students, on a laptop with or without a GPU: the file's name (or --assignment) says the
    assignment. Nothing is written; the exit status is 0 only when every item that ran got full marks.
    """
    course = course_or_usage_error(course_root)
    name = assignment or assignment_of(kernel, course)
    try:
        pipeline.check_assignments(course, [name])
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--assignment") from e
    with backends_for(course, backend) as backends:
        graded = pipeline.grade_submission(kernel, course, backends, None, [name])
    for result in graded.items:
        output = for_student(result.output).replace("\n", "\n    ")
        click.echo(f"{result.score:g} / {result.item.points:g}  {result.item.name}\n    {output}\n")
    score, points = sum(r.score for r in graded.items), sum(r.item.points for r in graded.items)
    click.echo(f"{score:g} / {points:g} points on the {graded.backend} backend")
    sys.exit(0 if all(r.passed or r.not_run for r in graded.items) else 1)


def course_kernels(course: Course) -> dict[str, str]:
    return {name: spec.kernel for name, spec in course.specs.items()}


def assignment_of(kernel: Path, course: Course) -> str:
    """The one assignment ``kernel`` is for, by its name or the kernel it defines (``discovery``)."""
    with discovery.opened(kernel, course_kernels(course)) as found:
        names = [name for name in course.rubric.assignments if found.candidates(name)]
    if len(names) == 1:
        return names[0]
    known = ", ".join(f"{name}.cu" for name in course.rubric.assignments)
    raise click.BadParameter(
        f"{kernel.name} could be {' or '.join(names)}: name one with --assignment"
        if names
        else f"{kernel.name} is no assignment's file; expected one of: {known} (or name it with --assignment)"
    )


@main.command()
@click.argument("assignments", nargs=-1, required=True)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("autograder.zip"),
    show_default=True,
    help="Where to write the zip.",
)
@course_option
def gradescope(assignments, out, course_root):
    """Write the autograder.zip to upload to Gradescope, grading ASSIGNMENTS (docs/gradescope.md).

    Every item of every one of ASSIGNMENTS is in each student's results.json (0 with the reason
    where a file is missing), so the total is the rubric's whatever was submitted.
    """
    course = course_or_usage_error(course_root)
    try:
        pipeline.check_assignments(course, list(assignments))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="ASSIGNMENTS") from e
    try:
        entries = gradescope_zip.build(course, list(assignments), out)
    except (gradescope_zip.BuildError, RubricError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"{out}: {len(entries)} files; upload it on Gradescope (docs/gradescope.md)")


@main.command()
@course_options
@click.option("--assignment", "assignments", multiple=True, help="Check only this assignment (repeatable).")
def selfcheck(course_root, backend, assignments):
    """Grade reference/ (must score 100 %) and starter/ (must score 0) for every assignment."""
    course = course_or_usage_error(course_root)
    names = list(assignments) or list(course.rubric.assignments)
    try:
        pipeline.check_assignments(course, names)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--assignment") from e
    failures = 0
    with backends_for(course, backend) as backends:
        for name in names:
            for folder, want_full in (("reference", True), ("starter", False)):
                graded = pipeline.grade_submission(course.root / folder, course, backends, None, [name])
                problems = selfcheck_problems(graded.items, want_full)
                failures += bool(problems)
                click.echo(selfcheck_line(name, folder, graded.items, problems))
    sys.exit(1 if failures else 0)


def selfcheck_problems(items: list[ItemResult], want_full: bool) -> list[ItemResult]:
    """Items that break the expectation; items not run here (no GPU) are excused."""
    run = [r for r in items if r.not_run is None]
    if want_full:
        return [r for r in run if not r.passed]
    return [r for r in run if r.score > 0 or r.regrade]


def selfcheck_line(name: str, folder: str, items: list[ItemResult], problems: list[ItemResult]) -> str:
    score, points = sum(r.score for r in items), sum(r.item.points for r in items)
    line = f"{'FAIL' if problems else 'ok  '} {name:<20} {folder:<9} {score:g} / {points:g}"
    skipped = sorted({f"{r.item.check}: {r.not_run}" for r in items if r.not_run})
    if skipped:
        line += f"  (not run: {'; '.join(skipped)})"
    for r in problems:
        output = r.output.replace("\n", "\n       ")
        line += f"\n     {r.item.name}: {r.score:g} / {r.item.points:g}\n       {output}"
    return line


@main.command()
@click.argument("submission", type=click.Path(exists=True, path_type=Path))
@click.option("--assignment", required=True, help="The assignment whose kernel to profile.")
@click.option(
    "--case",
    "case_text",
    default=None,
    help="Case parameters as k=v,k=v (default: the first case of the `safety` group).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Secret seed: a TA report's seed replays that grading's inputs for a graded case.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@course_option
def profile(submission, assignment, case_text, seed, as_json, course_root):
    """Run one case of SUBMISSION on the emulator; print counters by source line and findings."""
    course = course_or_usage_error(course_root)
    if assignment not in course.specs:
        raise click.BadParameter(f"no assignment {assignment!r}", param_hint="--assignment")
    spec = course.specs[assignment]
    case = parse_case(case_text) or spec.cases.get("safety", next(iter(spec.cases.values())))[0]
    with discovery.opened(submission, course_kernels(course)) as found:  # as grading finds it
        path, problem = found.locate(assignment)
        source, problem = policy.read_source(path) if path else ("", problem)
    if problem:
        raise click.ClickException(problem)
    try:
        prepared = prepare(spec, source, find_case(spec, case, seed), course.rubric.limits.case_s)
    except SpecError as e:
        raise click.ClickException(str(e)) from e
    emulator = select_backend("emulator", course.rubric.limits.compile_s, course.rubric.limits.emulator_mb)
    try:
        result = emulator.launch(prepared.launch)
    except BackendError as e:
        raise click.ClickException(str(e)) from e
    finally:
        emulator.close()
    filename = prepared.launch.program.filename
    if as_json:
        click.echo(json.dumps(profile_data(result, source, filename), indent=2, default=str))
    else:
        click.echo(profile_table(result, source, filename))


def parse_case(text: str | None) -> dict | None:
    """``"T=32,n=70"`` → ``{"T": 32, "n": 70}``."""
    if not text:
        return None
    case = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise click.BadParameter(f"{part!r} is not k=v", param_hint="--case")
        try:
            case[key.strip()] = json.loads(value)
        except json.JSONDecodeError as e:
            raise click.BadParameter(f"{value!r} is not a number", param_hint="--case") from e
    return case
