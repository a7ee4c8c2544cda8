"""The emulator against the H200, instruction by instruction (issue: verdicts you can trust).

Every case of the conformance suite (``suite.py``: each instruction and modifier the emulator
implements, run converged, diverged and aliased; warp collectives under split, partial and
exited masks; atomics on every type and space; random programs) runs on the emulator and is
compared bit for bit with what the H200 computed for the same inputs (``golden/``, recorded by
``bench/device/conformance.sh``), with the exceptions ``suite.py`` names."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autograder.emulator import rounding

from .emulated import module_ptx, run
from .record import GOLDEN
from .suite import all_modules, initial, mismatches

MODULES = {m.name: m for m in all_modules()}
META = json.loads((GOLDEN / "meta.json").read_text())


def _disagreements(module) -> list[str]:
    golden = np.load(GOLDEN / f"{module.name}.npz")
    ptx = module_ptx(module)
    lines = []
    for case in module.cases:
        native = {o.name: golden[f"{case.name}|{o.name}"] for o in case.outputs}
        lines += mismatches(case, run(module, case, ptx), native)
    return lines


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_emulator_computes_what_the_h200_computed(name):
    module = MODULES[name]
    assert module.digest() == META["modules"][name], (
        f"{name}'s kernels or inputs changed since the H200's answers were recorded: record them again "
        "(bench/device/conformance.sh)"
    )
    disagreements = _disagreements(module)
    assert not disagreements, "\n".join(disagreements[:20])


def test_the_recorded_answers_are_the_gpus():
    """Each case's outputs on the GPU differ from what they held before the launch (a kernel
    that never ran would leave its poison: the comparison would prove nothing)."""
    for name, module in MODULES.items():
        golden = np.load(GOLDEN / f"{name}.npz")
        for case in module.cases:
            before = [initial(case, o) for o in case.outputs]
            after = [golden[f"{case.name}|{o.name}"] for o in case.outputs]
            changed = [
                not np.array_equal(b.view(np.uint8), a.view(np.uint8))
                for b, a in zip(before, after, strict=True)
            ]
            assert any(changed), case.name
    assert META["device"] == "NVIDIA H200"


def test_a_planted_rounding_bug_is_caught(monkeypatch):
    """Directed rounding ignored (the emulator before this suite): the suite says where."""
    monkeypatch.setattr(rounding, "directed", lambda near, residual, mode: near)
    module = next(m for m in MODULES.values() if any(c.name == "add.rz.f32/converged" for c in m.cases))
    assert any(line.startswith("add.rz.f32/") for line in _disagreements(module))
