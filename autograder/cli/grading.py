"""The grading commands: ``grade`` (Gradescope's run: results.json whatever happens), ``check``
(a student's one kernel, all its feedback) and ``selfcheck`` (the instructor's references and
starters); the per-item progress lines and the points they print."""

from __future__ import annotations

import signal
import sys
import time
import traceback
from pathlib import Path

import click

from autograder.cli.shared import (
    backends_for,
    course_folder,
    course_options,
    course_or_usage_error,
    known_assignments,
    optional,
)
from autograder.course import which_assignment
from autograder.course.folder import Course, read_course
from autograder.delivery import gpu_service
from autograder.feedback import counted, for_student, two_decimals
from autograder.grading import pipeline
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.report import write_report
from autograder.grading.results import build_results, fallback_results, write_results
from autograder.grading.selfcheck import Verdict, verdicts


@click.command()
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
@click.option(
    "--gpu-url",
    envvar=gpu_service.URL_VARIABLE,
    show_envvar=True,
    default=None,
    help="A GPU grading service (autograder serve) for the items not run here, with the token "
    f"in {gpu_service.TOKEN_VARIABLE} (default: the course's {gpu_service.CONFIG_FILE}, if any).",
)
@click.option(
    "--timed-only",
    is_flag=True,
    help="Grade only the timed performance items (metric: time), the part that needs a GPU "
    "(autograder batch's GPU tasks).",
)
@click.option(
    "--gpu-answer",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Take the items not run here from this GPU grading's answer, shaped as autograder serve "
    "answers, instead of a GPU service (autograder batch's CPU tasks).",
)
def grade(
    submission,
    course_root,
    backend,
    rubric_path,
    results_path,
    report_path,
    seed,
    assignments,
    sanitize,
    gpu_url,
    timed_only,
    gpu_answer,
):
    """Grade SUBMISSION (a directory of <assignment>.cu files) into results.json.

    A results.json is written whatever happens; if the grader itself fails, every item
    scores 0 with the reason and the exit status is 2.
    """
    started = time.monotonic()
    rubric = None
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        course = read_course(course_folder(course_root), rubric_path)
        rubric = course.rubric
        with backends_for(course, backend, safety_checks=not timed_only) as backends:
            graded = pipeline.grade_submission(
                submission,
                course,
                backends,
                seed,
                list(assignments) or None,
                progress_printer(),
                sanitize,
                timed_only,
            )
        if gpu_answer:
            graded = with_gpu_answer(graded, gpu_answer)
        else:
            graded = with_gpu_service(graded, course, gpu_url, started)
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
    click.echo(f"{points_summary(graded.items)} -> {results_path}")


def with_gpu_service(graded: Grade, course: Course, url: str | None, started: float) -> Grade:
    """The items not run here graded by the GPU service, when one is configured, within the
    submission's time limit (``gpu_service``); each item it changes shown as it comes."""
    service = gpu_service.configured(course.root, url)
    remaining_s = course.rubric.limits.submission_s - (time.monotonic() - started)
    wait_s = gpu_service.wait_within(remaining_s)
    return gpu_service.completed(graded, service, wait_s, progress=progress_printer())


def with_gpu_answer(graded: Grade, answer: Path) -> Grade:
    """The items not run here taken from a GPU grading's answer (``autograder batch``'s GPU task),
    checked and merged exactly as a GPU service's; each item it changes shown as it comes."""
    data = answer.read_bytes()
    return gpu_service.answered(graded, data, gpu_service.CLASS_GPU, progress=progress_printer())


class Terminated(BaseException):
    """SIGTERM (Gradescope's time limit): a BaseException, so no ``except Exception`` swallows it."""


def raise_terminated(signum, frame):
    raise Terminated(
        f"the grader was stopped by {signal.Signals(signum).name} "
        "(the autograder's time limit on Gradescope?)"
    )


def progress_printer():
    """One line per item as it finishes, on stdout whatever it is (Gradescope shows it to instructors)."""

    def show(result: ItemResult) -> None:
        mark = "ok " if result.passed else ("?? " if result.regrade else "-- ")
        click.echo(
            f"{mark}{item_score(result):>5} / {two_decimals(result.item.points):<3} {result.item.name}"
        )

    return show


def item_score(result: ItemResult) -> str:
    """An item's score as a person reads it; ``-`` for an item not graded here (no GPU)."""
    return "-" if result.not_run else two_decimals(result.score)


def points_summary(items: tuple[ItemResult, ...], where: str = "") -> str:
    """Points earned of the points graded here (``where``); apart, the points graded later (on a
    GPU), which are no lost points."""
    here = [r for r in items if not r.not_run]
    earned, graded = sum(r.score for r in here), sum(r.item.points for r in here)
    summary = f"{two_decimals(earned)} / {two_decimals(graded)} points graded here{where}"
    later = [r for r in items if r.not_run]
    if later:
        points = sum(r.item.points for r in later)
        verb = "is" if two_decimals(points) == "1" else "are"
        reasons = "; ".join(dict.fromkeys(r.not_run for r in later))
        summary += f"; {counted(points, 'more point')} {verb} graded later ({reasons})"
    return summary


def slowest_case(items: tuple[ItemResult, ...]) -> str | None:
    """How long the slowest case of the items took here, from their case records."""
    timed = [c for r in items for c in r.evidence.cases or () if c.wall_s is not None]
    if not timed:
        return None
    case = max(timed, key=lambda c: c.wall_s or 0.0)
    took = f"{case.wall_s:.2f} s on the {case.backend} backend"
    return f"slowest case: {case.label} ({case.group}), {took}"


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


@click.command()
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
    known_assignments(course, [name], "--assignment")
    progress = progress_printer() if stdout_is_terminal() else None  # a long run shows it is alive
    with backends_for(course, backend) as backends:
        graded = pipeline.grade_submission(kernel, course, backends, None, [name], progress)
    if progress:
        click.echo()
    for result in graded.items:
        output = for_student(result.output).replace("\n", "\n    ")
        click.echo(
            f"{item_score(result)} / {two_decimals(result.item.points)}  {result.item.name}\n    {output}\n"
        )
    click.echo(points_summary(graded.items, f", on the {graded.backend} backend"))
    slowest = slowest_case(graded.items)
    if slowest:
        click.echo(slowest)
    sys.exit(0 if all(r.passed or r.not_run for r in graded.items) else 1)


def assignment_of(kernel: Path, course: Course) -> str:
    """The one assignment ``kernel`` is for, or a usage error naming those it could be for."""
    names = which_assignment.candidates(kernel, course)
    if len(names) == 1:
        return names[0]
    known = ", ".join(f"{name}.cu" for name in course.rubric.assignments)
    raise click.BadParameter(
        f"{kernel.name} could be {' or '.join(names)}: name one with --assignment"
        if names
        else f"{kernel.name} is no assignment's file; expected one of: {known} (or name it with --assignment)"
    )


@click.command()
@course_options
@click.option("--assignment", "assignments", multiple=True, help="Check only this assignment (repeatable).")
def selfcheck(course_root, backend, assignments):
    """Grade reference/ (must score 100 %) and starter/ (must score 0) for every assignment."""
    course = course_or_usage_error(course_root)
    names = known_assignments(course, assignments or course.rubric.assignments, "--assignment")
    failures = 0
    with backends_for(course, backend) as backends:
        for verdict in verdicts(course, backends, names):
            failures += bool(verdict.problems)
            click.echo(selfcheck_line(verdict))
    sys.exit(1 if failures else 0)


def selfcheck_line(verdict: Verdict) -> str:
    items = verdict.items
    score, points = sum(r.score for r in items), sum(r.item.points for r in items)
    line = f"{'FAIL' if verdict.problems else 'ok  '} {verdict.assignment:<20} {verdict.folder:<9} "
    line += f"{two_decimals(score)} / {two_decimals(points)}"
    skipped = sorted({f"{r.item.check}: {r.not_run}" for r in items if r.not_run})
    if skipped:
        line += f"  (not run: {'; '.join(skipped)})"
    for r in verdict.problems:
        output = r.output.replace("\n", "\n       ")
        line += (
            f"\n     {r.item.name}: {two_decimals(r.score)} / {two_decimals(r.item.points)}\n       {output}"
        )
    return line
