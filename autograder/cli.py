"""The ``autograder`` command: grade a submission, check the course, profile a kernel."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, astuple
from pathlib import Path

import click

from autograder.backends.compiler import nvrtc_problem
from autograder.backends.registry import open_backends, select_backend
from autograder.contract import BACKEND_NAMES, BackendError
from autograder.course import authoring, submitted, which_assignment
from autograder.course.folder import Course, read_course
from autograder.course.rubric import RubricError
from autograder.course.spec import SpecError
from autograder.delivery import class_table, gpu_service, gradescope_zip, logs, packaging
from autograder.delivery import handout as handout_package
from autograder.delivery import handout_profiles as handout_profiles_module
from autograder.delivery.packaging import CHECKOUT  # a course beside the grader: this checkout
from autograder.device import DEVICES
from autograder.emulator.profile import profile_data, profile_table
from autograder.feedback import counted, for_student, two_decimals
from autograder.grading import pipeline
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.ledger import ledger_table, lines_table
from autograder.grading.report import write_report
from autograder.grading.resources import describe
from autograder.grading.results import build_results, fallback_results, write_results
from autograder.grading.selfcheck import Verdict, verdicts
from autograder.profile import roofline
from autograder.profile.kernel_profile import CaseProfile, Roofline, profile_kernel

GRADESCOPE_SOURCE = Path("/autograder/source")  # where Gradescope's image unpacks the course


def course_folder(given: Path | None) -> Path:
    """The course: ``given`` (``--course`` or ``AUTOGRADER_COURSE``) where it holds ``assignments/``,
    else the first with a ``rubric.yaml`` of the working directory, this checkout and
    ``/autograder/source``; where there is none, one line that says where none was found and how
    to point at one (not the first missing file, which names neither)."""
    looked = (given,) if given else (Path.cwd(), CHECKOUT, GRADESCOPE_SOURCE)
    marker = "assignments/" if given else "rubric.yaml"
    for candidate in looked:
        if (candidate / marker).exists():
            return candidate
    where = " or ".join(str(path) for path in looked)
    raise click.ClickException(
        f"no course found at {where} (no {marker} there): run this in the course folder (the one "
        "holding assignments/ and rubric.yaml) or point at it with --course DIR or AUTOGRADER_COURSE=DIR"
    )


def course_options(command):
    """``--course`` and ``--backend``, shared by the grading commands."""
    command = click.option(
        "--backend",
        type=click.Choice(BACKEND_NAMES),
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

log_level_option = click.option(
    "--log-level",
    type=click.Choice(logs.LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
    expose_value=False,  # it sets up logging as it is parsed; the command never needs its value
    callback=lambda context, parameter, level: logs.configure(level.upper()),
    help="The least severe messages logged to stderr (WARNING: only what went wrong).",
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
@click.option(
    "--gpu-url",
    envvar=gpu_service.URL_VARIABLE,
    show_envvar=True,
    default=None,
    help="A GPU grading service (autograder serve) for the items not run here, with the token "
    f"in {gpu_service.TOKEN_VARIABLE} (default: the course's {gpu_service.CONFIG_FILE}, if any).",
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
        with backends_for(course, backend) as backends:
            graded = pipeline.grade_submission(
                submission, course, backends, seed, list(assignments) or None, progress_printer(), sanitize
            )
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
        return read_course(course_folder(root))
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


@main.command()
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
@log_level_option
def batch(source, out, course_root, backend, assignments, seed, address, only):
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
            progress.console.print(
                f"{outcome.status:<7} {outcome.submission.id} {outcome.elapsed_s:.0f} s{why}"
            )

        yield shown


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


@main.command()
@click.argument("assignments", nargs=-1, required=True)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("handout.zip"),
    show_default=True,
    help="Where to write it: a zip if the name ends in .zip, else a new folder.",
)
@course_option
def handout(assignments, out, course_root):
    """Write the students' handout of ASSIGNMENTS: starters, handouts, cases, the grader; no solution.

    `autograder check` run in the handout grades as the course's grader does; the traffic items
    compare with the reference kernel's counts, recorded here on the emulator (a minute or two).
    """
    course = course_or_usage_error(course_root)
    names = known_assignments(course, assignments, "ASSIGNMENTS")
    with backends_for(course, "emulator") as backends:
        entries = built(handout_package.build, course, names, out, backends)
    click.echo(f"{out}: {len(entries)} files; give it to students (its README.md says how to use it)")


def known_assignments(course: Course, names, param_hint: str) -> list[str]:
    """``names`` as a list, or a usage error naming the first the rubric does not have."""
    try:
        pipeline.check_assignments(course, list(names))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=param_hint) from e
    return list(names)


def built(build, *args) -> list[str]:
    """What a packaging ``build`` wrote, or a clean error saying what is missing."""
    try:
        return build(*args)
    except (packaging.BuildError, RubricError) as e:
        raise click.ClickException(str(e)) from e


@main.command()
@click.argument("assignments", nargs=-1, required=True)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("autograder.zip"),
    show_default=True,
    help="Where to write the zip.",
)
@click.option(
    "--gpu-url",
    default=None,
    help="A GPU grading service (autograder serve) that grades the items needing a GPU "
    "(docs/gpu-service.md); needs --gpu-token-file.",
)
@click.option(
    "--gpu-token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The file holding the course's one token for --gpu-url.",
)
@course_option
def gradescope(assignments, out, gpu_url, gpu_token_file, course_root):
    """Write the autograder.zip to upload to Gradescope, grading ASSIGNMENTS (docs/gradescope.md).

    Every item of every one of ASSIGNMENTS is in each student's results.json (0 with the reason
    where a file is missing), so the total is the rubric's whatever was submitted. With --gpu-url,
    the zip's gpu-service.json sends the items that need a GPU to that service.
    """
    course = course_or_usage_error(course_root)
    names = known_assignments(course, assignments, "ASSIGNMENTS")
    service = baked_service(gpu_url, gpu_token_file)
    entries = built(gradescope_zip.build, course, names, out, packaging.CHECKOUT, service)
    click.echo(f"{out}: {len(entries)} files; upload it on Gradescope (docs/gradescope.md)")


def baked_service(url: str | None, token_file: Path | None) -> gpu_service.Service | None:
    """The service ``--gpu-url`` and ``--gpu-token-file`` name, or None; a usage error if only one does."""
    if (url is None) != (token_file is None):
        raise click.UsageError("--gpu-url and --gpu-token-file go together")
    if url is None:
        return None
    problem = gpu_service.url_problem(url)
    if problem:
        raise click.BadParameter(problem, param_hint="--gpu-url")
    tokens = read_tokens(token_file)
    if len(tokens) != 1:
        raise click.BadParameter(
            f"{token_file.name} holds {len(tokens)} tokens; give a file with the one this course uses",
            param_hint="--gpu-token-file",
        )
    return gpu_service.Service(url, tokens[0].secret)


def read_tokens(path: Path) -> list[gpu_service.Token]:
    """The tokens of a token file, or a clean error naming its bad line."""
    try:
        return gpu_service.read_tokens(path)
    except (OSError, ValueError) as e:
        raise click.ClickException(str(e)) from e


@main.command()
@click.argument("name")
@click.option("--kernel", default=None, help="The __global__ function students write (default: NAME).")
@course_option
def new(name, kernel, course_root):
    """Scaffold assignment NAME: spec, handout, reference, starter and rubric entry (docs/authoring.md).

    The scaffold is a working assignment (selfcheck passes); nothing that exists is overwritten.
    """
    root = course_folder(course_root)
    try:
        written = authoring.scaffold(root, name, kernel)
    except authoring.AuthoringError as e:
        raise click.ClickException(str(e)) from e
    for path in written:
        click.echo(f"wrote {path.relative_to(root)}")
    course = course_or_usage_error(root)
    write_profile_blocks(course, stale_profiles(course, [name]))  # so that every --check passes
    click.echo(
        f"next: make the computation yours in assignments/{name}/spec.py and reference/{name}.cu,\n"
        f"      then run  autograder starters {name}\n"
        f"      and       autograder handout-profiles {name}\n"
        f"      and       autograder selfcheck --assignment {name} --backend emulator   (docs/authoring.md)"
    )


def regenerating(stale: str):
    """NAMES (default: every assignment) and --check, for the commands that regenerate files
    from the references; ``stale`` says what --check names."""

    def decorate(command):
        help_ = f"Write nothing; exit 1 naming every {stale}."
        command = click.option("--check", "check_only", is_flag=True, help=help_)(command)
        return click.argument("names", nargs=-1)(command)

    return decorate


@main.command()
@regenerating("starter that differs from what its reference generates")
@course_option
def starters(names, check_only, course_root):
    """Generate starter/NAME.cu from reference/NAME.cu's markers, for NAMES (default: every assignment).

    The SOLUTION blocks are removed and the PROMPT blocks un-commented (docs/authoring.md).
    """
    root = course_folder(course_root)
    try:
        known = authoring.assignment_names(root)
        unknown = [name for name in names if name not in known]
        if unknown:
            raise click.BadParameter(
                f"no assignment {', '.join(unknown)} (the course has: {', '.join(known)})", param_hint="NAMES"
            )
        checked = list(names) or known
        stale = authoring.stale_starters(root, checked)
        if not check_only:
            for name, text in stale.items():
                click.echo(f"wrote {authoring.write_starter(root, name, text).relative_to(root)}")
    except authoring.AuthoringError as e:
        raise click.ClickException(str(e)) from e
    if check_only and stale:
        for name in stale:
            click.echo(f"starter/{name}.cu is not what reference/{name}.cu generates")
        click.echo(f"to regenerate: autograder starters {' '.join(stale)}")
        sys.exit(1)
    click.echo(f"{len(checked)} starter(s) match their references")


@main.command()
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


@main.command()
@click.argument("submission", type=click.Path(exists=True, path_type=Path))
@click.option("--assignment", required=True, help="The assignment whose kernel to profile.")
@click.option(
    "--case",
    "case_texts",
    multiple=True,
    help="Case parameters as k=v,k=v; repeat for several (default: the first case of the `safety` group, "
    "and with --plot the roofline's case after it).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Secret seed: a TA report's seed replays that grading's inputs for a graded case.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw the roofline (yours and the reference's point) to this .svg or .png, at the last case: "
    "without --case, the largest graded case with the timed case's tiles.",
)
@click.option(
    "--timings",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A TA report (report.json) of a grading on a GPU: --plot also shows both kernels as it timed them.",
)
@click.option(
    "--arch",
    type=click.Choice(sorted(DEVICES)),
    default="sm_90",
    show_default=True,
    help="The GPU whose registers and occupancy to show (ptxas's figures for it).",
)
@course_option
def profile(submission, assignment, case_texts, seed, as_json, plot, timings, arch, course_root):
    """Run cases of SUBMISSION on the emulator: for each, counters by source line, findings, and
    the lecture's ledger (your totals beside the reference's and the closed forms); then the
    registers, spills and shared memory ptxas gives the kernel and its occupancy. Exits 1 when
    a case has findings."""
    course = course_or_usage_error(course_root)
    if assignment not in course.specs:
        raise click.BadParameter(f"no assignment {assignment!r}", param_hint="--assignment")
    with submitted.opened(submission, course) as found:  # as grading finds and reads it
        kernel = submitted.read_submitted(found, assignment)
    if kernel.problem:
        raise click.ClickException(kernel.problem)
    if timings and not plot:
        raise click.BadParameter(
            "the timings are drawn on the roofline: give --plot too", param_hint="--timings"
        )
    timed = report_timing(timings, assignment) if timings else None
    asked = tuple(parse_case(text) for text in case_texts)
    limits = course.rubric.limits
    emulator = select_backend("emulator", limits.compile_s, limits.emulator_mb)
    try:
        profiled = profile_kernel(course, kernel, asked, seed, emulator, arch, bool(plot), timed)
    except (SpecError, BackendError) as e:
        raise click.ClickException(str(e)) from e
    finally:
        emulator.close()
    if profiled.roofline and profiled.roofline.note:
        click.echo(profiled.roofline.note)
    if as_json:
        cases = [case_json(case) for case in profiled.cases]
        resources = profiled.resources or {"error": profiled.no_resources}
        click.echo(json.dumps({"cases": cases, **resources}, indent=2, default=str))
    else:
        click.echo("\n\n".join(case_text(case) for case in profiled.cases))
        click.echo("\n" + (profiled.no_resources or describe(profiled.resources)))
    if plot:
        plot_roofline(profiled.roofline, arch, plot)
    if profiled.has_findings:
        sys.exit(1)


def report_timing(report: Path, assignment: str) -> dict | None:
    """The case a GPU timed with the most work in a TA report, for ``assignment``; None, said, where none."""
    try:
        items = json.loads(report.read_text())["items"]
        timed = roofline.timed_case([i for i in items if i.get("assignment") == assignment])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise click.BadParameter(
            f"{report} is not a TA report (report.json): {e}", param_hint="--timings"
        ) from e
    if timed is None:
        click.echo(f"no GPU timing of {assignment} in {report}: the roofline shows the counted points only")
    return timed


def case_text(case: CaseProfile) -> str:
    """One profiled case as text: its title, its counters by line with its findings, the ledger,
    and the lines beside the reference's where there are any."""
    parts = [
        f"Case {roofline.case_text(case.case)} ({case.which})",
        profile_table(case.result, case.source, case.filename),
        ledger_table(list(case.ledger), case.reference.whence),
    ]
    if case.lines:
        parts.append(lines_table([astuple(line) for line in case.lines]))
    return "\n\n".join(parts)


def case_json(case: CaseProfile) -> dict:
    """One profiled case for ``--json``."""
    return {
        "case": case.case,
        "which": case.which,
        "reference_totals": case.reference.totals,
        "reference_from": case.reference.whence,
        **profile_data(case.result, case.source, case.filename),
        "ledger": [asdict(row) for row in case.ledger],
        "lines_beside_the_reference": [asdict(line) for line in case.lines],
    }


def plot_roofline(drawn: Roofline, arch: str, path: Path) -> None:
    """The roofline ``drawn`` on ``arch``'s roof, at ``path``."""
    if arch not in roofline.PEAKS:
        raise click.BadParameter(
            f"no roofline for {arch}; known: {', '.join(roofline.PEAKS)}", param_hint="--arch"
        )
    try:
        roofline.draw(list(drawn.points), arch, path, drawn.title)
    except ImportError as e:
        raise click.ClickException(
            f"the roofline needs matplotlib: pip install 'cuda-autograder[plot]' (in a checkout: "
            f"pip install -e '.[plot]') ({e})"
        ) from e
    click.echo(f"roofline -> {path}", err=True)  # beside stdout's --json, not in it


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


@main.command("handout-profiles")
@regenerating("handout whose profile block is stale")
@course_option
def handout_profiles(names, check_only, course_root):
    """Write, at the end of assignments/NAME/README.md, what `autograder profile` shows for the
    reference (its ledger, registers and occupancy; never its source), for NAMES (default: all)."""
    course = course_or_usage_error(course_root)
    unknown = [name for name in names if name not in course.specs]
    if unknown:
        raise click.BadParameter(f"no assignment {', '.join(unknown)}", param_hint="NAMES")
    checked = list(names) or list(course.specs)
    stale = stale_profiles(course, checked)
    if not check_only:
        write_profile_blocks(course, stale)
    elif stale:
        for name in stale:
            click.echo(f"assignments/{name}/README.md: its profile block is stale")
        click.echo(f"to rewrite: autograder handout-profiles {' '.join(stale)}")
        sys.exit(1)
    click.echo(f"{len(checked) - len(stale) if check_only else len(checked)} handout profile(s) current")


def stale_profiles(course: Course, names: list[str]) -> dict[str, str]:
    """``handout_profiles.stale`` on the emulator: the README text of each stale one of ``names``."""
    emulator = select_backend("emulator", course.rubric.limits.compile_s, course.rubric.limits.emulator_mb)
    try:
        return handout_profiles_module.stale(course, names, emulator)
    except BackendError as e:
        raise click.ClickException(str(e)) from e
    finally:
        emulator.close()


def write_profile_blocks(course: Course, readmes: dict[str, str]) -> None:
    for name, text in readmes.items():
        handout_profiles_module.write(course, name, text)
        click.echo(f"wrote the profile block of assignments/{name}/README.md")


@main.command("class-report")
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


@main.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (TLS: a reverse proxy)."
)
@click.option("--port", type=int, default=8000, show_default=True, help="Port to listen on.")
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The callers' tokens, one a line, each `token` or `name:token` (the name is for the log).",
)
@click.option(
    "--address", default=None, help="A Ray cluster to join (default: an embedded one on this machine)."
)
@click.option(
    "--backend",
    type=click.Choice(BACKEND_NAMES),
    default="gpu",
    show_default=True,
    help="Where the kernels run (auto: gpu when the Ray cluster has a GPU).",
)
@click.option(
    "--deadline",
    "deadline_s",
    type=click.FloatRange(min=1),
    default=600,
    show_default=True,
    help="Seconds a job may wait and run; past it, its items say not run.",
)
@click.option(
    "--per-minute",
    type=click.IntRange(min=1),
    default=120,
    show_default=True,
    help="Requests a minute per token.",
)
@click.option(
    "--concurrent", type=click.IntRange(min=1), default=100, show_default=True, help="Jobs at once per token."
)
@click.option(
    "--read-timeout",
    "read_s",
    type=click.FloatRange(min=0.1),
    default=30,
    show_default=True,
    help="Seconds a client has to send a request's headers, and again its body; then it is dropped.",
)
@click.option(
    "--keep-alive",
    "keep_alive_s",
    type=click.FloatRange(min=0.1),
    default=5,
    show_default=True,
    help="Seconds an idle connection stays open between requests.",
)
@click.option(
    "--connections",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Connections at once; past it, requests are answered 503.",
)
@course_option
@log_level_option
def serve(host, port, token_file, course_root, **settings):
    """The GPU grading service that Gradescope's autograder calls: POST /v1/grade, GET /v1/health.

    Each job is graded as `autograder grade` grades it, on a Ray worker (one GPU each on a GPU);
    docs/gpu-service.md says how to run it behind a TLS proxy and on a cluster.
    """
    try:  # fastapi, uvicorn and limits come with the serve extra; no grading command needs them
        import uvicorn

        from autograder.delivery import serve as service
    except ImportError as e:
        message = f"autograder serve needs {e.name}: pip install 'cuda-autograder[serve]'"
        raise click.ClickException(message) from e
    course = course_or_usage_error(course_root)
    served = service.ServeSettings(**settings)  # the other options, by name
    tokens = read_tokens(token_file)
    app = service.create_app(course, served, tokens)
    uvicorn.Server(service.server_config(app, served, tokens, host, port)).run()
