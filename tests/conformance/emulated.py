"""The conformance suite's cases run on the emulator (what CI compares with ``golden/``)."""

from __future__ import annotations

import numpy as np

from autograder.backends.compiler import compile_ptx
from autograder.contract import Buffer, Launch, Program
from autograder.emulator import emulate

from .suite import Case, Module, dims, initial


def program(module: Module, kernel: str) -> Program:
    return Program(module.source, f"{module.name}.cu", kernel)


def module_ptx(module: Module) -> str:
    """The module's PTX (every kernel of it), compiled once."""
    return compile_ptx(program(module, module.cases[0].kernel)).ptx


def run(module: Module, case: Case, ptx: str) -> dict[str, np.ndarray]:
    args = tuple(Buffer(name, array) for name, array in case.inputs)
    args += tuple(Buffer(o.name, initial(case, o), True) for o in case.outputs)
    launch = Launch(program(module, case.kernel), dims(case.grid), dims(case.block), args, case.shared_bytes)
    result = emulate(ptx, case.kernel, launch)
    return {o.name: result.outputs[o.name] for o in case.outputs}
