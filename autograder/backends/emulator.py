"""The ``emulator`` backend: NVRTC compiles to PTX, the numpy PTX interpreter runs it.

Needs no GPU. Reports every out-of-bounds access, barrier divergence, shared-memory race
and uninitialised shared read as findings, and counts memory traffic per source line."""

from __future__ import annotations

import contextlib

from autograder.backends.base import Backend, Capabilities, Launch, LaunchResult, Program, Unsupported
from autograder.compiler import compile_ptx
from autograder.emulator import emulate
from autograder.emulator.machine import DEFAULT_BUDGET, decode_launchable, keep_freed_memory


class EmulatorBackend(Backend):
    name = "emulator"
    capabilities = Capabilities(sees_every_access=True)

    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = budget
        keep_freed_memory()

    def compile(self, program: Program) -> None:
        """NVRTC's errors, and a local frame over CUDA's limit per thread."""
        compiled = compile_ptx(program)
        with contextlib.suppress(Unsupported):  # reported by the launch that meets it
            decode_launchable(compiled.ptx, compiled.lowered_name, program)

    def launch(self, launch: Launch) -> LaunchResult:
        compiled = compile_ptx(launch.program)
        return emulate(compiled.ptx, compiled.lowered_name, launch, launch.instruction_limit or self.budget)
