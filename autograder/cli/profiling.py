"""``profile``: a kernel's cases on the emulator beside the reference, printed as text or JSON,
its resources, and its roofline drawn (``autograder/profile/kernel_profile.py`` computes them)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, astuple
from pathlib import Path

import click

from autograder.cli.shared import course_option, course_or_usage_error, emulator_for
from autograder.contract import BackendError
from autograder.course import submitted
from autograder.course.spec import SpecError
from autograder.device import DEVICES
from autograder.emulator.profile import profile_data, profile_table
from autograder.grading.ledger import ledger_table, lines_table
from autograder.grading.resources import describe
from autograder.profile import roofline
from autograder.profile.kernel_profile import CaseProfile, Roofline, profile_kernel


@click.command()
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
    emulator = emulator_for(course)
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
