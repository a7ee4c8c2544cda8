"""The ``emulator`` backend: NVRTC compiles to PTX, the numpy PTX interpreter runs it.

Needs no GPU. The same compile assembles the PTX for ``sm_90`` with ptxas, as a GPU needs it:
what ptxas refuses does not compile here either, and a launch the driver would refuse for
what the cubin says (its ``__launch_bounds__``, its registers) is refused here too. Reports
every out-of-bounds access, barrier divergence, shared-memory race and uninitialised shared
read as findings, and counts memory traffic per source line.

The emulator's modules are imported where the backend is built and used, in its worker: the
grader's process imports this module too, for the class's ``capabilities``
(``registry.select_backend``), and runs no launch; the machine's modules would cost it about
90 ms of every grading."""

from __future__ import annotations

import contextlib
import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from autograder import emulator
from autograder.backends import compile_ahead
from autograder.backends.compiler import (
    Compiled,
    PtxasRefusal,
    compile_ptx,
    compile_ptx_ahead,
    compile_virtual,
    ptxas_figures,
)
from autograder.contract import Backend, Capabilities, Launch, LaunchResult, Program, Unsupported

if TYPE_CHECKING:
    from autograder.emulator.limits import Function


def counting_version() -> str:
    """What counts a launch here: a digest of the emulator's sources and this adapter's. A change
    to any of them is another version, whose counts are never taken for this one's."""
    sources = [*sorted(Path(emulator.__file__).parent.glob("*.py")), Path(__file__)]
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class EmulatorBackend(Backend):
    name = "emulator"
    capabilities = Capabilities(sees_every_access=True, counting_version=counting_version())

    def __init__(self, budget: int | None = None):
        from autograder.emulator.machine import DEFAULT_BUDGET, keep_freed_memory, quiet_collector

        self.budget = DEFAULT_BUDGET if budget is None else budget
        keep_freed_memory()
        quiet_collector()

    def compile(self, program: Program) -> None:
        """NVRTC's errors, ptxas's refusals for ``sm_90``, and a local frame over CUDA's limit per thread."""
        from autograder.emulator.machine import decode_launchable

        compile_ahead.advance()
        compiled = assembled(program)
        with contextlib.suppress(Unsupported):  # reported by the launch that meets it
            decode_launchable(compiled.ptx, compiled.lowered_name, program)

    def compile_ahead(self, programs: tuple[Program, ...]) -> None:
        """Start the compiles of ``programs`` on the cores this worker leaves idle (``compile_ahead``)."""
        compile_ptx_ahead(programs)

    def close(self) -> None:
        compile_ahead.stop()

    def launch(self, launch: Launch) -> LaunchResult:
        from autograder.emulator.limits import check_function
        from autograder.emulator.machine import emulate

        compile_ahead.advance()
        compiled = assembled(launch.program)
        check_function(function(launch.program), launch)
        return emulate(compiled.ptx, compiled.lowered_name, launch, launch.instruction_limit or self.budget)


def assembled(program: Program) -> Compiled:
    """``program`` compiled and assembled for ``sm_90``. A limit ptxas refuses that the emulator
    knows (``limits.check_kernel``) is worded in its terms, the kernel and line named; any
    other refusal in ptxas's."""
    from autograder.emulator.machine import decode_launchable

    try:
        return compile_ptx(program)
    except PtxasRefusal:
        virtual = compile_virtual(program)
        with contextlib.suppress(Unsupported):  # PTX the emulator cannot read: ptxas's words
            decode_launchable(virtual.ptx, virtual.lowered_name, program)
        raise


@functools.lru_cache(maxsize=64)
def function(program: Program) -> Function:
    """What the driver would read from ``program``'s cubin: its launch bounds and registers."""
    from autograder.emulator.limits import Function

    compiled = compile_ptx(program)
    try:
        registers = ptxas_figures(compiled.log, compiled.lowered_name)["registers"]
    except ValueError:  # an NVRTC whose log leaves ptxas's report out (13.0, seen on the H200's image
        registers = 0  # for the starters): the register limit goes unchecked, the launch bounds not
    return Function.of(compiled.ptx, compiled.lowered_name, registers)
