"""The ``autograder`` command: its group (``main``, the script's entry point) and the commands,
each module of this package a group of them by whom they serve; they parse options and print,
what they compute is the layers'."""

from __future__ import annotations

import os

# One BLAS thread, set before numpy loads (the commands' modules below import it): a reference's
# matrices are small, and OpenBLAS's idle threads spin between its calls on the core the emulator
# worker needs (a whole-course grade on 2 cores: 12.4 -> 8.7 s CPU, verdicts the same). The worker
# inherits it; a value the caller set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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
