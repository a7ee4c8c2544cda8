"""A fragment whose registers are consecutive rows of one register table is gathered and
scattered at once (``wmma._regs``): the same elements, and the same registers written, as
register by register, for f32 and f16 fragments, whole chunks and some warps of one."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.emulator import wmma

LANES = 128


def _table(rng, halves: bool) -> np.ndarray:
    """Eight registers of every lane: f16 pairs (as their bits) or f32 values."""
    if halves:
        return rng.standard_normal((8, 2 * LANES)).astype(np.float16).view(np.uint32).copy()
    return rng.standard_normal((8, LANES)).astype(np.float32)


@pytest.mark.parametrize("halves", [False, True])
@pytest.mark.parametrize("warps", [[0, 1, 2, 3], [1, 3]])
def test_a_fragment_of_consecutive_registers_moves_as_register_by_register(halves, warps):
    rng = np.random.default_rng(len(warps) + halves)
    rows = (np.array(warps)[:, None] * 32 + np.arange(32)).astype(np.int64)
    block = _table(rng, halves)
    apart = [row.copy() for row in block]
    gathered = wmma._gather_fragment(block, rows, halves)
    np.testing.assert_array_equal(gathered, wmma._gather_fragment(apart, rows, halves))
    values = rng.standard_normal((len(warps), wmma.ELEMENTS)).astype(np.float32)
    wmma._scatter_fragment(block, rows, values, halves)
    wmma._scatter_fragment(apart, rows, values, halves)
    np.testing.assert_array_equal(block, np.stack(apart))
