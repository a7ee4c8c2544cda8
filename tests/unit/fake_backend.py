"""A backend for unit tests: the "kernel" is Python source, run on numpy arrays.

The program's source defines a function named like the kernel; it receives a context
(grid, block, defines, and ways to report findings and counters) and every argument by
name, and writes its outputs in place. ``#error`` in the source is a compile error at
that line, so compile failures read like NVRTC's. This keeps the pipeline testable with
no NVRTC and no GPU, through the same Backend contract as the real ones.
"""

from __future__ import annotations

import contextlib

import numpy as np

from autograder.backends.registry import Backends
from autograder.contract import (
    Backend,
    Buffer,
    Capabilities,
    CompileError,
    Counters,
    Finding,
    LaunchResult,
)

EMULATOR_LIKE = Capabilities(sees_every_access=True)


class Context:
    def __init__(self, launch):
        self.grid = launch.grid
        self.block = launch.block
        self.defines = dict(launch.program.defines)
        self.findings: list[Finding] = []
        self.counters = Counters()

    def finding(self, kind: str, message: str, **where) -> None:
        self.findings.append(Finding(kind, message, **where))

    def count(self, name: str, value: int) -> None:
        self.counters.totals[name] = self.counters.totals.get(name, 0) + int(value)


class FakeBackend(Backend):
    """Counts and finds like the emulator by default; ``capabilities`` makes it play another backend."""

    def __init__(self, name: str = "emulator", capabilities: Capabilities = EMULATOR_LIKE):
        self.name = name
        self.capabilities = capabilities

    def compile(self, program) -> None:
        self.load(program)

    def load(self, program):
        """The Python function standing in for the kernel."""
        for number, line in enumerate(program.source.splitlines(), 1):
            if line.strip().startswith("#error"):
                raise CompileError(f"{program.filename}({number}): error: {line.strip()[6:].strip()}")
        namespace = {"np": np}
        exec(compile(program.source, program.filename, "exec"), namespace)
        if program.kernel not in namespace:
            raise CompileError(f"{program.filename}: no kernel named '{program.kernel}' was found")
        return namespace[program.kernel]

    def launch(self, launch):
        kernel = self.load(launch.program)
        arrays = {a.name: a.data.copy() for a in launch.args if isinstance(a, Buffer)}
        scalars = {a.name: a.value for a in launch.args if not isinstance(a, Buffer)}
        context = Context(launch)
        kernel(context, **arrays, **scalars)
        counters = context.counters if self.capabilities.sees_every_access else None
        return LaunchResult(outputs=arrays, findings=context.findings, counters=counters)


@contextlib.contextmanager
def open_fake_backends(
    name: str = "emulator",
    compile_s: float = 60,
    emulator_mb: float | None = None,
    safety_checks: bool = True,
):
    """Stands in for ``backends.open_backends``: one fake backend playing both roles."""
    fake = FakeBackend()
    yield Backends(grading=fake, safety=fake)
