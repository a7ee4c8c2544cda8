"""A whole class: ``batch`` (every submission graded on Ray, with its progress bar),
``class-report`` (the class's HTML pages) and ``table`` (the class table from TA reports)."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

import click

from autograder.cli.shared import (
    course_options,
    course_or_usage_error,
    known_assignments,
    log_level_option,
    optional,
)
from autograder.delivery import class_table
from autograder.delivery.batch import TASKS_PER_GPU


@click.command()
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Where the class goes."
)
@course_options
@click.option(
    "--assignment",
    "assignments",
    multiple=True,
    help="Grade this assignment in every submission, submitted or not (repeatable; default: those found).",
)
@click.option(
    "--seed", type=int, default=None, help="The class's secret seed (default: the last run's, or fresh)."
)
@click.option(
    "--address", default=None, help="A Ray cluster to join (default: an embedded one on this machine)."
)
@click.option(
    "--only", multiple=True, help="Regrade this student (name, SID, email or folder) even if current."
)
@click.option(
    "--tasks-per-gpu",
    type=click.IntRange(1, 16),
    default=TASKS_PER_GPU,
    show_default=True,
    help="GPU tasks sharing each GPU: one's host work overlaps another's GPU work; a timing has the "
    "GPU alone, launches share it (docs/batch.md).",
)
@log_level_option
def batch(source, out, course_root, backend, assignments, seed, address, only, tasks_per_gpu):
    """Grade a whole class on Ray: a Gradescope export (zip or folder) or a folder of submissions.

    Each submission is graded exactly as `autograder grade` grades it, into OUT/<submission>/;
    OUT/scores.csv is for Gradescope's score upload, OUT/regrades.csv lists what a TA should look
    at. A re-run regrades only what changed (docs/batch.md).
    """
    from autograder.delivery import batch as class_batch

    course = course_or_usage_error(course_root)
    names = tuple(known_assignments(course, assignments, "--assignment"))
    out.mkdir(parents=True, exist_ok=True)
    settings = class_batch.Settings(
        backend=backend or course.rubric.backend,
        seed=class_batch.class_seed(out, seed),
        assignments=names,
        limit_s=course.rubric.limits.submission_s,
        tasks_per_gpu=tasks_per_gpu,
    )
    with tempfile.TemporaryDirectory() as scratch:
        try:
            submissions = class_batch.read_class(source, Path(scratch))
        except class_batch.BatchError as e:
            raise click.ClickException(str(e)) from e
        if not submissions:
            raise click.ClickException(f"{source} holds no submission folder")
        with batch_progress(len(submissions)) as shown:
            outcomes = class_batch.grade_class(submissions, course, out, settings, address, only, shown)
    optional("the class report", write_class_report, out)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("graded", "current", "failed", "refused")}
    refused = f", {counts['refused']} refused (not graded: see regrades.csv)" if counts["refused"] else ""
    click.echo(
        f"{counts['graded']} graded, {counts['current']} current (not regraded), {counts['failed']} failed"
        f"{refused} -> {out}/scores.csv, {out}/regrades.csv, {out}/report/index.html"
    )
    sys.exit(1 if counts["failed"] else 0)


def write_class_report(out: Path) -> None:
    """The class report of ``out`` (imported here: jinja2 and matplotlib come with the batch extra)."""
    from autograder.delivery.class_report import write_class_report as write

    write(out)


@contextlib.contextmanager
def batch_progress(total: int):
    """A progress bar (done, running, failed, time left) and one line per submission as it finishes."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[running]} running, {task.fields[failed]} failed"),
        TimeRemainingColumn(),
    )
    with Progress(*columns) as progress:
        bar = progress.add_task("class", total=total, running=0, failed=0)
        failed = 0

        def shown(outcome, running: int) -> None:
            nonlocal failed
            failed += outcome.status == "failed"
            progress.update(bar, advance=1, running=running, failed=failed)
            why = f": {outcome.reason}" if outcome.reason else ""
            gpu = f" (GPU task {outcome.gpu_s:.1f} s)" if outcome.gpu_s is not None else ""
            progress.console.print(
                f"{outcome.status:<7} {outcome.submission.id} {outcome.elapsed_s:.0f} s{gpu}{why}"
            )

        yield shown


@click.command()
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


@click.command("class-report")
@click.argument("batch_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write the pages (default: DIR/report).",
)
def class_report(batch_dir, out):
    """The HTML class report of a class graded by `autograder batch` into DIR: opens from disk."""
    try:  # jinja2 and matplotlib come with the batch extra; the grading commands never need them
        from autograder.delivery.class_report import ClassReportError, write_class_report
    except ImportError as e:
        missing = e.name or "jinja2 and matplotlib"
        message = f"the class report needs {missing}: pip install 'cuda-autograder[batch]'"
        raise click.ClickException(message) from e
    try:
        index = write_class_report(batch_dir, out)
    except ClassReportError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"class report -> {index}")
