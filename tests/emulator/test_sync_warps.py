"""``__syncwarp``'s shadow update (``shadow.SharedShadow.sync_warps``), which looks only at the
words a thread holds, against the update over every word it replaces: random shadows of two
blocks of four warps, random sets of warps synced, each word's thread kept or released alike."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.emulator import shadow

WORDS_PER_BLOCK = 300
BLOCKS = 2


def _every_word(by: np.ndarray, warp_keys: np.ndarray, free: int) -> np.ndarray:
    """The update over every word: each word's warp looked up in the table, no thread's at its end."""
    slot = np.arange(by.size) // WORDS_PER_BLOCK
    synced = shadow._warp_table(warp_keys, BLOCKS)
    out = by.copy()
    out[synced[np.where(by >= 0, slot * 32 + by // 32, -1)]] = free
    return out


def _holders(rng, size: int) -> np.ndarray:
    """Per word: a thread of 128, or none (NEVER, CLEAN / NOBODY, MANY)."""
    return rng.choice(np.array([*range(128), shadow.NEVER, shadow.CLEAN], np.int32), size)


@pytest.mark.parametrize("seed", range(8))
def test_sync_warps_releases_what_the_update_over_every_word_releases(seed):
    rng = np.random.default_rng(seed)
    checked = shadow.SharedShadow(BLOCKS * WORDS_PER_BLOCK, WORDS_PER_BLOCK)
    checked.state[:] = _holders(rng, checked.state.size)
    checked.reader = _holders(rng, checked.state.size)
    checked.atomic = _holders(rng, checked.state.size)
    warps = rng.choice(BLOCKS * 4, rng.integers(1, BLOCKS * 4), replace=False)
    keys = np.sort(warps // 4 * 1024 + warps % 4)
    expected = [
        _every_word(by, keys, free)
        for by, free in (
            (checked.state, shadow.CLEAN),
            (checked.reader, shadow.NOBODY),
            (checked.atomic, shadow.NOBODY),
        )
    ]
    checked.sync_warps(keys)
    for got, want in zip((checked.state, checked.reader, checked.atomic), expected, strict=True):
        np.testing.assert_array_equal(got, want)
