"""The ``emulator`` backend: NVRTC compiles to PTX, the numpy PTX interpreter runs it.

Needs no GPU. Reports every out-of-bounds access, barrier divergence, shared-memory race
and uninitialised shared read as findings, and counts memory traffic per source line."""

from __future__ import annotations

from autograder.backends.base import Backend, Launch, LaunchResult, Program
from autograder.compiler import compile_ptx
from autograder.emulator import emulate
from autograder.emulator.machine import DEFAULT_BUDGET


class EmulatorBackend(Backend):
    name = "emulator"

    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = budget

    def compile(self, program: Program) -> None:
        compile_ptx(program)

    def launch(self, launch: Launch) -> LaunchResult:
        compiled = compile_ptx(launch.program)
        return emulate(compiled.ptx, compiled.lowered_name, launch, self.budget)
