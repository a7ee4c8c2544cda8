"""The instructor's commands that write a course's files: ``new`` (an assignment's scaffold),
``starters`` (the starters from the references' markers) and ``handout-profiles`` (the profile
block at the end of each handout), the last two with ``--check``."""

from __future__ import annotations

import sys

import click

from autograder.cli.shared import course_folder, course_option, course_or_usage_error, emulator_for
from autograder.contract import BackendError
from autograder.course import authoring
from autograder.course.folder import Course
from autograder.delivery import handout_profiles as profile_blocks


@click.command()
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


@click.command()
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


@click.command("handout-profiles")
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
    emulator = emulator_for(course)
    try:
        return profile_blocks.stale(course, names, emulator)
    except BackendError as e:
        raise click.ClickException(str(e)) from e
    finally:
        emulator.close()


def write_profile_blocks(course: Course, readmes: dict[str, str]) -> None:
    """Each handout of ``readmes`` rewritten (``handout_profiles.write``), a line for each."""
    for name, text in readmes.items():
        profile_blocks.write(course, name, text)
        click.echo(f"wrote the profile block of assignments/{name}/README.md")
