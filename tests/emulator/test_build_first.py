"""What a kernel's first launch builds, taken in shortcuts, against the plain ways they replace:
``shared.Views.view``'s keys memoised per register and dtype against ``Views.view_key``
worked out each time; ``Views.slot``'s tables seen as a type kept while a chunk is bound
against each resolved afresh (``shared._resolve`` with nothing seen); a run of fmas' analysis
of its register rows in Python (``ops._outer``, ``ops._consecutive``) against numpy's
(``_outer_reference``, ``_consecutive_reference``), on every reference and corpus kernel's
registers and on drawn rows."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from autograder.backends.compiler import compile_ptx
from autograder.contract import Program, Unsupported
from autograder.emulator import ops
from autograder.emulator.isa import Reg, Vec, dtype_of
from autograder.emulator.machine import decoded_kernel
from autograder.emulator.registers import RegisterFile
from autograder.emulator.shared import Views, _resolve

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "reference").glob("*.cu")) + sorted((Path(__file__).parent / "corpus").glob("*.cu"))
DTYPES = [np.dtype(t) for t in ("int8", "uint16", "int32", "uint32", "float32", "int64", "float64", "bool")]


def decoded(source: Path):
    text = source.read_text()
    kernel = source.stem
    if source.parent.name == "corpus":
        kernel = re.search(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)", text)[1]
    c = compile_ptx(Program(text, source.name, kernel, ()))
    return decoded_kernel(c.ptx, c.lowered_name, source.name)


def registers_of(program) -> list[Reg]:
    found = []
    for ins in program:
        for o in ins.operands:
            for item in o.items if isinstance(o, Vec) else (o,):
                if type(item) is Reg:
                    found.append(item)
                elif hasattr(item, "base") and type(item.base) is Reg:
                    found.append(item.base)
    return found


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.stem)
def test_view_keys_memoised_are_the_keys_worked_out(source):
    d = decoded(source)
    memo, plain = Views(d.registers), Views(d.registers)
    operands = registers_of(d.program)
    operands += [Reg(o.name, negate=True) for o in operands[:5]]
    operands.append(Reg("%not_declared"))
    for _ in range(2):  # the second time from the memo
        for o in operands:
            for dt in [*DTYPES, np.float32, np.bool_]:
                try:
                    expected = None if o.negate else plain.view_key(o, dt)
                except Unsupported:
                    with pytest.raises(Unsupported):
                        memo.view(o, dt)
                    continue
                assert memo.view(o, dt) == expected


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.stem)
def test_slots_of_a_chunk_bound_resolve_as_afresh_after_a_rebinding(source):
    d = decoded(source)
    views = Views(d.registers)
    names = list(d.registers.slots)
    rng = np.random.default_rng(len(names))
    chunks = [SimpleNamespace(registers=RegisterFile(d.registers, n)) for n in (32, 64, 32)]
    for chunk in chunks:
        views.bind(chunk)
        for name in rng.choice(names, min(12, len(names)), replace=False):
            for dt in rng.choice(DTYPES, 3, replace=False):
                key = views.view(Reg(str(name)), dt)
                if key is not None:
                    views.slot(key)
        for key, array in zip(views.keys, views.arrays, strict=True):
            fresh = _resolve(key, chunk.registers, {})
            assert array.dtype == fresh.dtype and array.shape == fresh.shape
            assert array.__array_interface__["data"] == fresh.__array_interface__["data"]
    views.unbind()
    views.bind(chunks[1])
    key = views.view(Reg(names[0]), d.registers.types[d.registers.slots[names[0]][0]][0])
    fresh = _resolve(key, chunks[1].registers, {})
    assert views.arrays[views.slot(key)].__array_interface__["data"] == fresh.__array_interface__["data"]


def _same(fast, slow) -> bool:
    if fast is None or slow is None:
        return fast is slow
    return all(np.array_equal(f, s) and f.dtype == s.dtype for f, s in zip(fast, slow, strict=True))


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.stem)
def test_a_kernels_fma_runs_are_analysed_as_numpy_analyses_them(source):
    d = decoded(source)
    for k, span in enumerate(d.fma_runs):
        if not span or d.program[k].op != "fma":  # wmma.mma runs: wmma.build_mma_run's
            continue
        run = d.program[k : k + span]
        rows = [[d.registers.slots[o.name][1] for o in ins.operands] for ins in run]
        for index in (np.array([r[j] for r in rows]) for j in range(4)):
            assert ops._consecutive(index) == ops._consecutive_reference(index)
        a, b = (np.array([r[j] for r in rows]) for j in (1, 2))
        assert _same(ops._outer(a, b), ops._outer_reference(a, b))


def test_drawn_rows_are_analysed_as_numpy_analyses_them():
    rng = np.random.default_rng(7)
    outers = 0
    for _ in range(3000):
        n = int(rng.integers(1, 25))
        start = int(rng.integers(0, 40))
        roll = rng.random()
        if roll < 0.3:
            index = np.arange(start, start + n)
        elif roll < 0.6:
            index = np.arange(start, start + n) + (np.arange(n) == rng.integers(0, n)) * rng.integers(-2, 3)
        else:
            index = rng.integers(0, 6, n)
        assert ops._consecutive(index) == ops._consecutive_reference(index), index
        u, v = rng.integers(0, 50, int(rng.integers(1, 6))), rng.integers(0, 50, int(rng.integers(1, 6)))
        a, b = np.repeat(u, len(v)), np.tile(v, len(u))
        if rng.random() < 0.5:  # one row changed: often not an outer product
            which = int(rng.integers(0, len(a)))
            (a if rng.random() < 0.5 else b)[which] += int(rng.integers(-1, 2))
        if rng.random() < 0.2:
            a, b = a[: int(rng.integers(1, len(a) + 1))], b[: len(a[: int(rng.integers(1, len(a) + 1))])]
            b = b[: len(a)] if len(b) >= len(a) else np.resize(b, len(a))
        fast, slow = ops._outer(a, b), ops._outer_reference(a, b)
        outers += slow is not None
        assert _same(fast, slow), (a, b)
    assert ops._consecutive(np.array([], np.int64)) == ops._consecutive_reference(np.array([], np.int64))
    assert 500 < outers < 2900  # both answers drawn often
    assert dtype_of("f32") == np.float32
