"""The ``autograder`` command: its group (``main``, the script's entry point) and the commands,
each module of this package a group of them by whom they serve; they parse options and print,
what they compute is the layers'. A command's module is imported when the command is asked for
(click's lazy subcommands): ``grade`` on Gradescope, or a student's ``check``, does not load the
batch, the service or the handouts first."""

from __future__ import annotations

import atexit
import gc
import importlib

import click

# Each command by name: the module of this package that defines it.
COMMANDS = {
    "grade": "grading",
    "check": "grading",
    "selfcheck": "grading",
    "profile": "profiling",
    "table": "whole_class",
    "gradescope": "release",
    "handout": "release",
    "handout-profiles": "authoring",
    "new": "authoring",
    "starters": "authoring",
    "batch": "whole_class",
    "class-report": "whole_class",
    "serve": "service",
}


def __getattr__(name: str):
    """A module of this package by name (``cli.grading``), imported when first asked for."""
    if name in set(COMMANDS.values()) | {"shared"}:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Commands(click.Group):
    """A group whose commands are imported from their modules (:data:`COMMANDS`) when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command = getattr(importlib.import_module(f"autograder.cli.{module}"), cmd_name.replace("-", "_"))
        if command.name != cmd_name:
            raise RuntimeError(f"autograder.cli.{module} defines {command.name!r}, not {cmd_name!r}")
        return command


@click.group(cls=Commands)
@click.version_option(package_name="cuda-autograder")
def main():
    """Grade CUDA kernel assignments on a GPU (PyCUDA) or on the PTX emulator."""
    # Python's exit collects cyclic garbage over every object alive, 0.13-0.17 s of a grading's
    # CPU, for memory the process gives back as it ends: frozen first (as the worker does, serve)
    atexit.register(gc.freeze)
