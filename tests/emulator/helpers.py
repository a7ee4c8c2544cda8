"""Helpers for emulator tests: compile a CUDA source with NVRTC and run one launch."""

from __future__ import annotations

import numpy as np

from autograder.backends.emulator import EmulatorBackend
from autograder.contract import Buffer, Launch, LaunchResult, Program, Scalar
from autograder.emulator import shared


def launch(
    source: str,
    kernel: str,
    grid,
    block,
    args,
    shared_bytes: int = 0,
    defines: tuple = (),
    budget: int | None = None,
    filename: str = "kernel.cu",
    cooperative: bool = False,
) -> LaunchResult:
    """Run ``kernel`` once; ``args`` are Buffers and Scalars (or (name, array[, is_output]))."""
    built = tuple(_arg(a) for a in args)
    program = Program(source, filename, kernel, tuple(defines))
    backend = EmulatorBackend() if budget is None else EmulatorBackend(budget)
    return backend.launch(
        Launch(program, _dim(grid), _dim(block), built, shared_bytes, cooperative=cooperative)
    )


def _dim(d):
    d = (d,) if isinstance(d, int) else tuple(d)
    return (*d, *(1,) * (3 - len(d)))


def _arg(a):
    if isinstance(a, Buffer | Scalar):
        return a
    raise TypeError(a)


def out(name: str, n: int, dtype=np.float32) -> Buffer:
    """An output buffer poisoned with NaN (or all ones bits for integers)."""
    dtype = np.dtype(dtype)
    poison = np.nan if dtype.kind == "f" else np.iinfo(dtype).max if dtype.kind == "u" else -1
    data = np.full(n, poison, dtype)
    return Buffer(name, data, True)


def kinds(result: LaunchResult) -> list[str]:
    return sorted(f.kind for f in result.findings)


def line_of(source: str, marker: str) -> int:
    """The 1-based line of ``source`` that contains ``marker``."""
    for number, text in enumerate(source.splitlines(), 1):
        if marker in text:
            return number
    raise ValueError(marker)


def reported(result: LaunchResult) -> tuple:
    """Everything a launch reports, to compare: outputs' bytes, findings, counters."""
    counters = result.counters
    return (
        {name: array.tobytes() for name, array in result.outputs.items()},
        [(f.kind, f.message) for f in result.findings],
        counters.totals,
        sorted(counters.by_line.items()),
    )


def shared_built(monkeypatch) -> list[str]:
    """The instructions (opcode and modifiers) a kernel's shared executor is built for from now
    on (``emulator/shared.py``)."""
    used: list[str] = []
    build = shared._build

    def recorded(ins, views):
        made = build(ins, views)
        if made is not None:
            used.append(".".join((ins.op, *ins.mods)))
        return made

    monkeypatch.setattr(shared, "_build", recorded)
    return used


def every_executor_per_chunk(monkeypatch) -> None:
    """From now on no executor is shared: each is built per chunk (``ops.build_executor``)."""
    monkeypatch.setattr(shared.Shared, "executor", lambda self, k: None)
