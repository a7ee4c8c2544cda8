"""The course as it leaves the instructor: ``handout`` (the students' copy, no solution) and
``gradescope`` (the grading machine's ``autograder.zip``, with the GPU service it calls)."""

from __future__ import annotations

from pathlib import Path

import click

from autograder.cli.shared import (
    backends_for,
    course_option,
    course_or_usage_error,
    known_assignments,
    read_tokens,
)
from autograder.course.rubric import RubricError
from autograder.delivery import gpu_service, gradescope_zip, packaging
from autograder.delivery import handout as handout_package


@click.command()
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


def built(build, *args) -> list[str]:
    """What a packaging ``build`` wrote, or a clean error saying what is missing."""
    try:
        return build(*args)
    except (packaging.BuildError, RubricError) as e:
        raise click.ClickException(str(e)) from e


@click.command()
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
