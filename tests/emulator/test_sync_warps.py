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


def _keeping_emptied(checked: shadow.SharedShadow, keys: np.ndarray) -> list:
    """The log as ``sync_warps`` left it before it dropped the reads none of whose lanes is left:
    each read's lanes of warps not synced, empty ones kept."""
    wpb = checked.words_per_block
    synced = shadow._warp_table(keys, BLOCKS)
    kept = []
    for rows, threads, per, pc, ordered, strong in checked.log:
        keep = ~synced[shadow._warp_place(rows * per // wpb, threads)]
        kept.append((rows[keep], threads[keep], per, pc, None if ordered is None else ordered[keep], strong))
    return kept


@pytest.mark.parametrize("seed", range(8))
def test_a_write_after_sync_warps_finds_what_it_found_with_emptied_reads_kept(seed):
    """Reads logged by random warps, some warps synced, then a write by a random warp: the
    hazards are those of a log that keeps the reads ``sync_warps`` emptied (and dropped)."""
    rng = np.random.default_rng(seed)
    checked = shadow.SharedShadow(BLOCKS * WORDS_PER_BLOCK, WORDS_PER_BLOCK)
    checked.state[:] = shadow.CLEAN
    for pc in range(12):  # each read by the lanes of one or two warps of one block
        slot, warps = rng.integers(BLOCKS), rng.choice(4, rng.integers(1, 3), replace=False)
        threads = np.concatenate([w * 32 + np.sort(rng.choice(32, 8, replace=False)) for w in warps])
        rows = slot * WORDS_PER_BLOCK + rng.integers(0, WORDS_PER_BLOCK, threads.size)
        checked.read(rows, threads.astype(np.int32), 1, pc)
    warps = rng.choice(BLOCKS * 4, rng.integers(1, BLOCKS * 4), replace=False)
    keys = np.sort(warps // 4 * 1024 + warps % 4)
    kept = shadow.SharedShadow(BLOCKS * WORDS_PER_BLOCK, WORDS_PER_BLOCK)
    kept.state[:] = shadow.CLEAN
    kept.log = _keeping_emptied(checked, keys)
    checked.sync_warps(keys)
    assert len(checked.log) <= len(kept.log)
    writer = int(rng.integers(128))
    rows = rng.integers(0, BLOCKS * WORDS_PER_BLOCK, 32)
    threads = np.full(32, writer, np.int32)
    assert checked.write(rows, threads, 1, 99, distinct=True) == kept.write(
        rows, threads, 1, 99, distinct=True
    )
