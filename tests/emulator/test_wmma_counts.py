"""A wmma tile's traffic counted by its warps' rows (``Traffic.count``'s ``per_warp``: each warp's
256 elements consecutive, memoised by their pattern) against the general count it replaces
(the elements' warps looked up and grouped: ``BankModel._general``, ``counters.sectors``'s
sort), on generated tiles: 1 to 20 warps, row- and column-major, strides and bases of every
alignment, the same pattern in every warp or each its own, f16 and f32 elements."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.emulator import counters, wmma
from autograder.emulator.counters import BankModel, sectors

ROW_MAJOR, COL_MAJOR = "row", "col"


def tiles(rng, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each warp's element addresses of one tile, in ``wmma._addresses``'s order, and the
    warp of each element: 1 to 20 warps, a layout, strides and bases drawn."""
    n_warps = int(rng.integers(1, 21))
    layout = rng.choice([ROW_MAJOR, COL_MAJOR])
    same = rng.random() < 0.5  # one stride and alignment for every warp, as a kernel's tiles mostly
    stride = rng.choice([16, 24, 72, 136, int(rng.integers(0, 300))], 1 if same else n_warps)
    base = rng.integers(0, 1 << 14, n_warps) * (size if rng.random() < 0.8 else 1)
    e = np.arange(wmma.ELEMENTS)
    r, c = e // wmma.TILE, e % wmma.TILE
    if layout == COL_MAJOR:
        r, c = c, r
    offsets = r[None, :] * np.broadcast_to(stride, (n_warps,))[:, None] + c[None, :]
    addresses = base[:, None] + offsets * size
    warps = np.repeat(rng.choice(64, n_warps, replace=False), wmma.ELEMENTS)
    return addresses.reshape(-1), np.sort(warps)


@pytest.mark.parametrize("size", [2, 4])
def test_a_tiles_wavefronts_by_its_warps_rows_are_the_general_count(rng, size):
    model = BankModel({})
    for _ in range(60):
        addresses, warps = tiles(rng, size)
        words = addresses >> 2
        for _ in range(2):  # the second time from the memo
            got = model.wavefronts(warps, words, True, 1, wmma.ELEMENTS)
            assert got == BankModel._general(warps, words)


@pytest.mark.parametrize("size", [2, 4])
def test_a_tiles_sectors_by_its_warps_rows_are_the_general_count(rng, size):
    for _ in range(60):
        addresses, warps = tiles(rng, size)
        got = sectors(warps, addresses, size, True, False, wmma.ELEMENTS)
        assert got == sectors(warps, addresses, size)


def test_a_tile_and_as_many_lanes_of_full_warps_are_memoised_apart(rng):
    """One warp's 256 elements and eight warps of 32 lanes with the same relative words count
    differently: the memo tells them apart (by the entries a warp has)."""
    model = BankModel({})
    words = np.tile(np.arange(32) * 2, 8)  # a tile of stride 0 in halves: its rows the same words
    tile = model.wavefronts(np.zeros(256, np.int64), words, True, 1, wmma.ELEMENTS)
    lanes = model.wavefronts(np.repeat(np.arange(8), 32), words, True, 1)
    assert tile == BankModel._general(np.zeros(256, np.int64), words)
    assert lanes == BankModel._general(np.repeat(np.arange(8), 32), words)
    assert counters._MEMO is not model._memo and tile != lanes
