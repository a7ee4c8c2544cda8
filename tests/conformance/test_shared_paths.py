"""The executors a kernel's small chunks share (``emulator/shared.py``) against the per-chunk
executors they replace (``ops.build_executor``), on every case of the conformance suite.

``test_conformance.py`` holds the shared paths to the H200's answers; this holds them to the
slow path, bit for bit, and further than the GPU's recorded launches reach: each instruction
and random program converged, diverged (partial masks, lanes alone) and with its destination in
a source's register (aliasing), at the suite's two blocks of 256 and at a ragged launch of two
blocks of 100 (a partial last warp in each block). Outputs, findings and counters must be
identical, and the shared paths must have run for every instruction they cover."""

from __future__ import annotations

import dataclasses
import json

import pytest

from autograder.contract import Buffer, Launch
from autograder.emulator import emulate, shared
from autograder.emulator.machine import decoded_kernel

from .emulated import module_ptx, program
from .suite import all_modules, initial

MODULES = {m.name: m for m in all_modules() if m.name.startswith(("instructions", "programs"))}
RAGGED_BLOCK = 100  # lanes a block: three full warps and one of four lanes


def _report(module, case, ptx: str) -> str:
    """Everything the launch reports, as text: outputs' bytes, findings, counters (or its error)."""
    args = tuple(Buffer(name, array) for name, array in case.inputs)
    args += tuple(Buffer(o.name, initial(case, o), True) for o in case.outputs)
    launch = Launch(
        program(module, case.kernel), (case.grid, 1, 1), (case.block, 1, 1), args, case.shared_bytes
    )
    try:
        result = emulate(ptx, case.kernel, launch)
    except Exception as error:  # the same failure both ways is agreement
        return f"{type(error).__name__}: {error}"
    outputs = {o.name: result.outputs[o.name].tobytes().hex() for o in case.outputs}
    findings = [(f.kind, f.message, f.line) for f in result.findings]
    counters = [result.counters.totals, sorted(result.counters.by_line.items())]
    return json.dumps([outputs, findings, counters], default=str)


def _reports(module, ptx: str) -> list[str]:
    decoded_kernel.cache_clear()  # no chunk or executor kept from the other way's launches
    cases = list(module.cases) + [dataclasses.replace(c, block=RAGGED_BLOCK) for c in module.cases]
    return [_report(module, case, ptx) for case in cases]


def _recording(monkeypatch) -> set[str]:
    """The instructions a shared executor is built for from now on."""
    used: set[str] = set()
    build = shared._build

    def recorded(ins, views):
        made = build(ins, views)
        if made is not None:
            used.add(ins.op)
        return made

    monkeypatch.setattr(shared, "_build", recorded)
    return used


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_shared_paths_report_what_the_per_chunk_paths_report(name, monkeypatch):
    module = MODULES[name]
    ptx = module_ptx(module)
    used = _recording(monkeypatch)
    with_shared = _reports(module, ptx)
    monkeypatch.setattr(shared.Shared, "executor", lambda self, k: None)  # every executor per chunk
    without = _reports(module, ptx)
    decoded_kernel.cache_clear()
    names = [c.name for c in module.cases] + [f"{c.name} (blocks of {RAGGED_BLOCK})" for c in module.cases]
    differ = [n for n, a, b in zip(names, with_shared, without, strict=True) if a != b]
    assert not differ, f"{len(differ)} launches differ, first: {differ[:5]}"
    assert used, "no shared executor ran: the comparison proves nothing"


def test_the_suite_runs_every_shared_path(monkeypatch):
    """Each instruction ``shared.RECIPES`` covers runs shared in some case of the suite (but
    wmma, which no case has: ``tests/emulator/test_shared_wmma.py`` holds it)."""
    used = _recording(monkeypatch)
    for module in MODULES.values():
        decoded_kernel.cache_clear()
        ptx = module_ptx(module)
        for case in module.cases:
            _report(module, case, ptx)
        if used >= set(shared.RECIPES) - {"wmma"}:
            break
    decoded_kernel.cache_clear()
    never = set(shared.RECIPES) - {"wmma"} - used
    assert not never, f"never shared: {sorted(never)}"
