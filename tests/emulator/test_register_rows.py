"""``RegisterFile.consecutive``: registers as one (registers, lanes) view only where they are
consecutive rows of one table, in order, of the width asked for (a vector load's destinations
and a wmma fragment are written through it: any other order must not be taken for one)."""

from __future__ import annotations

import numpy as np

from autograder.emulator.isa import Reg
from autograder.emulator.registers import RegisterFile, RegisterLayout

F32 = tuple(f"%f{k}" for k in range(8))
U32 = tuple(f"%r{k}" for k in range(8))
LAYOUT = RegisterLayout(
    ((np.dtype(np.float32), F32), (np.dtype(np.uint32), U32)),
    {**{n: (0, k) for k, n in enumerate(F32)}, **{n: (1, k) for k, n in enumerate(U32)}},
)


def _regs(*names: str) -> list[Reg]:
    return [Reg(name) for name in names]


def test_consecutive_rows_of_one_table_are_one_view_and_nothing_else_is():
    registers = RegisterFile(LAYOUT, 4)
    view = registers.consecutive(_regs("%f2", "%f3", "%f4"), np.float32)
    assert view is not None and view.shape == (3, 4)
    view[:] = 1.0
    assert (registers.tables[0][2:5] == 1.0).all() and (registers.tables[0][[1, 5]] == 0).all()
    assert registers.consecutive(_regs("%r0", "%r1"), np.int32) is not None  # any type of its width
    not_one = [
        _regs("%f2", "%f4", "%f3", "%f5"),  # the first and last in place, not those between
        _regs("%f3", "%f2"),
        _regs("%f7", "%r0"),  # two tables
        _regs("%f1", "%f1"),
        _regs("%f1", "%x"),  # undeclared
        [Reg("%f1"), Reg("%f2", negate=True)],
    ]
    for operands in not_one:
        assert registers.consecutive(operands, np.float32) is None, operands
    assert registers.consecutive(_regs("%f0", "%f1"), np.float64) is None  # another width
