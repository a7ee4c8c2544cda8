"""The ``autograder`` command: its group (``main``, the script's entry point) and the commands,
each module of this package a group of them by whom they serve; they parse options and print,
what they compute is the layers'."""

from __future__ import annotations

import click

from autograder.cli.authoring import handout_profiles, new, starters
from autograder.cli.grading import check, grade, selfcheck
from autograder.cli.profiling import profile
from autograder.cli.release import gradescope, handout
from autograder.cli.service import serve
from autograder.cli.whole_class import batch, class_report, table


@click.group()
@click.version_option(package_name="cuda-autograder")
def main():
    """Grade CUDA kernel assignments on a GPU (PyCUDA) or on the PTX emulator."""


for command in (
    grade,
    check,
    selfcheck,
    profile,
    table,
    gradescope,
    handout,
    handout_profiles,
    new,
    starters,
    batch,
    class_report,
    serve,
):
    main.add_command(command)
