"""The emulator's fast paths against the slow paths they replace, on the conformance suite's
generated cases: the executors a kernel's small chunks share (``emulator/shared.py``) against the
per-chunk executors (``ops.build_executor``), and the scheduler's shortcuts (``Scheduler._others_exit``:
a group's register-only instructions over the whole chunk where the other lanes wait to exit;
``Scheduler._skips``: lanes running alone what the others branch over) against the lanes parting
and meeting again.

``test_conformance.py`` holds the fast paths to the H200's answers (each is shown taken on the
recorded cases below); this holds them to the slow paths, bit for bit, and further than the
GPU's recorded launches reach: each instruction and random program converged, diverged (partial
masks, lanes alone) and with its destination in a source's register (aliasing), at the suite's
two blocks of 256 and at a ragged launch of two blocks of 100 (a partial last warp in each
block). Outputs, findings and counters must be identical, and each fast path must have run."""

from __future__ import annotations

import dataclasses
import json

import pytest

from autograder.contract import Buffer, Launch
from autograder.emulator import emulate, scheduler, shared
from autograder.emulator.machine import decoded_kernel

from .emulated import module_ptx, program
from .suite import all_modules, initial

MODULES = {m.name: m for m in all_modules() if m.name.startswith(("instructions", "programs"))}
RAGGED_BLOCK = 100  # lanes a block: three full warps and one of four lanes
# each scheduler shortcut, and the modules whose cases take it: lanes exit where the instruction
# cases' masks leave them; the random programs branch forward over loads and arithmetic
SHORTCUTS = {"_others_exit": "instructions", "_skips": "programs"}
# Where a fast path and the slow one are known to differ, and why (docs/known-gaps.md): an f64
# sum of two NaNs takes its payload from whichever operand numpy's loop for that array layout
# picks; the H200 takes the second's (lane 188 here: sNaN 0x7ff0000000000001 + qNaN gives the
# qNaN, as the slow path does; the whole-chunk run gives 0x7ff8000000000001)
KNOWN = {("_others_exit", "instructions05"): {f"add.rz.f64/diverged (blocks of {RAGGED_BLOCK})"}}


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


def _differ(module, fast: list[str], slow: list[str]) -> list[str]:
    names = [c.name for c in module.cases] + [f"{c.name} (blocks of {RAGGED_BLOCK})" for c in module.cases]
    return [n for n, a, b in zip(names, fast, slow, strict=True) if a != b]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_shared_paths_report_what_the_per_chunk_paths_report(name, monkeypatch):
    module = MODULES[name]
    ptx = module_ptx(module)
    used = _recording(monkeypatch)
    with_shared = _reports(module, ptx)
    monkeypatch.setattr(shared.Shared, "executor", lambda self, k: None)  # every executor per chunk
    without = _reports(module, ptx)
    decoded_kernel.cache_clear()
    differ = _differ(module, with_shared, without)
    assert not differ, f"{len(differ)} launches differ, first: {differ[:5]}"
    assert used, "no shared executor ran: the comparison proves nothing"


def _taking(monkeypatch, shortcut: str) -> list[bool]:
    """Whether ``Scheduler.<shortcut>`` was taken, each time it is asked from now on."""
    taken: list[bool] = []
    method = getattr(scheduler.Scheduler, shortcut)

    def recorded(self, *args):
        found = method(self, *args)
        taken.append(found)
        return found

    monkeypatch.setattr(scheduler.Scheduler, shortcut, recorded)
    return taken


@pytest.mark.parametrize(
    ("shortcut", "name"),
    [(s, n) for s, prefix in SHORTCUTS.items() for n in sorted(MODULES) if n.startswith(prefix)],
)
def test_the_schedulers_shortcuts_report_what_parting_lanes_report(shortcut, name, monkeypatch):
    module = MODULES[name]
    ptx = module_ptx(module)
    taken = _taking(monkeypatch, shortcut)
    fast = _reports(module, ptx)
    monkeypatch.setattr(scheduler.Scheduler, shortcut, lambda self, *args: False)
    slow = _reports(module, ptx)
    decoded_kernel.cache_clear()
    differ = _differ(module, fast, slow)
    assert set(differ) == KNOWN.get((shortcut, name), set()), f"{len(differ)} launches differ: {differ[:5]}"
    assert any(taken), f"{shortcut} was never taken: the comparison proves nothing"


@pytest.mark.parametrize("shortcut", sorted(SHORTCUTS))
def test_the_recorded_cases_take_each_shortcut(shortcut, monkeypatch):
    """Each shortcut runs on cases the H200 answered (``test_conformance.py``), so the GPU holds
    it too, not only the slow path."""
    taken = _taking(monkeypatch, shortcut)
    for module in (m for n, m in sorted(MODULES.items()) if n.startswith(SHORTCUTS[shortcut])):
        decoded_kernel.cache_clear()
        ptx = module_ptx(module)
        for case in module.cases:
            _report(module, case, ptx)
        if any(taken):
            break
    decoded_kernel.cache_clear()
    assert any(taken), f"no recorded case takes {shortcut}"


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
