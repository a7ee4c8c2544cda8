"""What several commands share: the course options and where the course is found, the backends
opened within the rubric's limits, the check of assignment names, the token file, a step the
grades do not depend on."""

from __future__ import annotations

from pathlib import Path

import click

from autograder.backends.compiler import nvrtc_problem
from autograder.backends.registry import open_backends, select_backend
from autograder.contract import BACKEND_NAMES, Backend
from autograder.course.folder import Course, read_course
from autograder.course.rubric import RubricError
from autograder.course.spec import SpecError
from autograder.delivery import gpu_service, logs
from autograder.delivery.packaging import CHECKOUT  # a course beside the grader: this checkout
from autograder.grading import pipeline

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


def course_or_usage_error(root: Path | None) -> Course:
    """The course, or a clean error naming the bad file and line."""
    try:
        return read_course(course_folder(root))
    except (RubricError, SpecError) as e:
        raise click.ClickException(str(e)) from e


def known_assignments(course: Course, names, param_hint: str) -> list[str]:
    """``names`` as a list, or a usage error naming the first the rubric does not have."""
    try:
        pipeline.check_assignments(course, list(names))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=param_hint) from e
    return list(names)


def backends_for(course: Course, name: str | None, safety_checks: bool = True):
    """The backends ``--backend`` (default: the rubric's) names, within the rubric's limits;
    ``safety_checks`` False when the grading runs none (``open_backends``)."""
    optional("the compiler check", warn_unpinned_compiler)
    limits = course.rubric.limits
    return open_backends(name or course.rubric.backend, limits.compile_s, limits.emulator_mb, safety_checks)


def emulator_for(course: Course) -> Backend:
    """The emulator alone, within the rubric's limits (``profile``, ``handout-profiles``); the
    caller closes it."""
    limits = course.rubric.limits
    return select_backend("emulator", limits.compile_s, limits.emulator_mb)


def warn_unpinned_compiler() -> None:
    """On stderr (the instructor's log, not the student's feedback): an NVRTC other than the pinned one."""
    problem = nvrtc_problem()
    if problem:
        click.echo(f"warning: {problem}", err=True)


def optional(what: str, step, *args) -> None:
    """Run a step the grades do not depend on; its failure is a warning, never a lost grade."""
    try:
        step(*args)
    except Exception as e:
        click.echo(f"warning: {what} failed: {type(e).__name__}: {e}", err=True)


def read_tokens(path: Path) -> list[gpu_service.Token]:
    """The tokens of a token file, or a clean error naming its bad line."""
    try:
        return gpu_service.read_tokens(path)
    except (OSError, ValueError) as e:
        raise click.ClickException(str(e)) from e
