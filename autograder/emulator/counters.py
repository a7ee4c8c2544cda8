"""Traffic counting, per warp request, as the lectures and Nsight Compute count it.

Global: a request is one warp-wide instruction; its sectors are the distinct 32-byte
segments its active lanes touch. Shared: 32 banks of 4 bytes; a request costs as many
wavefronts as the largest number of distinct 4-byte words falling in one bank (one word
read by many lanes is a broadcast, free); wavefronts beyond the minimum are conflicts.

Every instruction that moves data is counted in the space its address really lies in:
``ld``/``ldu``/``st``, ``cp.async`` (a global load and a shared store), ``wmma.load`` and
``wmma.store`` (one value per tile element), and the atomics. An atomic read-modify-write
(``atom``, and ``red``, which returns nothing to the thread but reads its address all the
same) moves its word from memory to the unit that updates it (the L2 for global memory,
the SM for shared) and back: it counts as one load request and one store request of its
width, with the values, bytes and sectors or wavefronts an ``ld`` and an ``st`` of that
width at those addresses would count. ``atomicAdd(&x[i], 0)`` is a load of ``x[i]`` (and a
store). Not counted: ``ld.const`` of ``__constant__`` variables (the constant cache),
``ld.param`` of the kernel's arguments, local memory; an explicit space that does not
reach the address (``ld.const`` of a global buffer, ``ld.param`` through a pointer) is a
finding, not an uncounted read (``access.py``)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from autograder.backends.base import COUNTER_NAMES, Counters


def distinct_per_warp(warps: np.ndarray, keys: np.ndarray, row: int | None = None) -> int:
    """Sum over warps of the number of distinct ``keys``; lanes arrive sorted by warp.
    ``row``: every warp is full and has exactly ``row`` consecutive entries."""
    if keys.size < 2:
        return int(keys.size)
    if row is not None:
        rows = keys.reshape(-1, row)
        step = rows[:, 1:] - rows[:, :-1]
        if not (step.min() >= 0 or step.max() <= 0):
            rows = np.sort(rows, axis=1)
            step = rows[:, 1:] - rows[:, :-1]
        return rows.shape[0] + int(np.count_nonzero(step))
    low = int(keys.min())
    if int(keys.max()) - low >= 1 << 44:  # too far apart to pack with the warp: allocations
        return _distinct_pairs(warps, keys)
    combined = (warps << 44) | (keys - low)
    step = combined[1:] - combined[:-1]
    if step.min() < 0:  # timsort: warps arrive in order, each in a few sorted runs (17x quicksort)
        combined = np.sort(combined, kind="stable")
        step = combined[1:] - combined[:-1]
    return 1 + int(np.count_nonzero(step))


def _distinct_pairs(warps: np.ndarray, keys: np.ndarray) -> int:
    order = np.lexsort((keys, warps))
    warps, keys = warps[order], keys[order]
    return 1 + int(np.count_nonzero((warps[1:] != warps[:-1]) | (keys[1:] != keys[:-1])))


def warp_count(warps: np.ndarray) -> int:
    """Distinct warps among lanes sorted by warp."""
    if warps.size < 2:
        return int(warps.size)
    return 1 + int(np.count_nonzero(warps[1:] != warps[:-1]))


def whole_warps(warps: np.ndarray) -> bool:
    """Is each warp of these entries (grouped by warp) exactly 32 consecutive entries?"""
    if warps.size % 32 or not warps.size:
        return False
    rows = warps.reshape(-1, 32)
    return bool((rows[:, 0] == rows[:, -1]).all() and (rows[1:, 0] != rows[:-1, 0]).all())


def sectors(warps: np.ndarray, addr: np.ndarray, nbytes: int, full_warps: bool = False) -> int:
    first = addr >> 5
    row = 32 if full_warps and addr.size % 32 == 0 else None
    if nbytes <= 32 and not int(np.bitwise_or.reduce(addr)) & (nbytes - 1):
        return distinct_per_warp(warps, first, row)  # aligned: each lane in one sector
    last = (addr + (nbytes - 1)) >> 5
    if nbytes <= 32 and (first == last).all():
        return distinct_per_warp(warps, first, row)
    if row is not None:
        both = np.concatenate([first.reshape(-1, 32), last.reshape(-1, 32)], axis=1)
        return distinct_per_warp(warps, both.reshape(-1), 64)
    order = np.argsort(np.concatenate([warps, warps]), kind="stable")
    return distinct_per_warp(np.concatenate([warps, warps])[order], np.concatenate([first, last])[order])


FEW_WARPS = 16  # up to this many warps with different address patterns: one memo lookup each


class BankModel:
    """Wavefronts of shared-memory requests, memoised by each warp's address pattern."""

    def __init__(self):
        self._memo: dict[bytes, tuple[int, int]] = {}

    def wavefronts(
        self, warps: np.ndarray, words: np.ndarray, full_warps: bool, words_per_lane: int = 1
    ) -> tuple[int, int]:
        """(wavefronts, minimum wavefronts) summed over the warps of one request; each lane
        reads ``words_per_lane`` consecutive words from ``words``."""
        if full_warps and words.size % 32 == 0 and words.size:
            rows = words.reshape(-1, 32)
            rel = rows - rows[:, :1]  # a warp's count depends only on its words relative to one
            if (rel == rel[0]).all():
                count, minimum = self._row(rel[0], words_per_lane)
                return count * rows.shape[0], minimum * rows.shape[0]
            if rows.shape[0] <= FEW_WARPS:
                counts = [self._row(r, words_per_lane) for r in rel]
                return sum(c for c, _ in counts), sum(m for _, m in counts)
        if words_per_lane > 1:
            words = (words[:, None] + np.arange(words_per_lane)).reshape(-1)
            warps = np.repeat(warps, words_per_lane)
        return self._general(warps, words)

    def _row(self, rel: np.ndarray, words_per_lane: int) -> tuple[int, int]:
        key = (rel.tobytes(), words_per_lane)
        if key not in self._memo:
            every = (rel[:, None] + np.arange(words_per_lane)).reshape(-1)
            self._memo[key] = _row_wavefronts(every)
        return self._memo[key]

    @staticmethod
    def _general(warps: np.ndarray, words: np.ndarray) -> tuple[int, int]:
        """Any active lanes: pad each warp's words into a row, then count per row and bank."""
        first = np.ones(warps.size, bool)
        first[1:] = warps[1:] != warps[:-1]
        starts = np.flatnonzero(first)
        group = np.cumsum(first) - 1
        rank = np.arange(warps.size) - starts[group]
        table = np.full((starts.size, int(rank.max()) + 1), -1, np.int64)
        table[group, rank] = words
        table.sort(axis=1)
        distinct = table >= 0
        distinct[:, 1:] &= table[:, 1:] != table[:, :-1]
        banks = (table & 31) + 32 * np.arange(starts.size)[:, None]
        per_bank = np.bincount(banks[distinct], minlength=32 * starts.size).reshape(-1, 32)
        minimum = (distinct.sum(axis=1) + 31) // 32
        return int(per_bank.max(axis=1).sum()), int(minimum.sum())


def _row_wavefronts(rel: np.ndarray) -> tuple[int, int]:
    words = np.unique(rel)
    banks = words & 31
    return int(np.bincount(banks, minlength=32).max()), (words.size + 31) // 32


class Tally:
    """Counters per instruction, summed to per-line and total :class:`Counters` at the end."""

    def __init__(self, n_instructions: int):
        self.lanes = [0] * n_instructions
        self.warps = [0] * n_instructions
        self.events: list[dict[str, int]] = [defaultdict(int) for _ in range(n_instructions)]

    def add(self, index: int, name: str, value: int) -> None:
        self.events[index][name] += value

    def counters(self, lines: list[int | None], flops_per_lane: list[int]) -> Counters:
        totals = dict.fromkeys(COUNTER_NAMES, 0)
        by_line: dict[int, dict[str, int]] = {}
        for i, line in enumerate(lines):
            if not self.lanes[i] and not self.events[i]:
                continue  # never ran: a row of zeros
            row = dict(self.events[i])
            row["lane_instructions"] = self.lanes[i]
            row["warp_instructions"] = self.warps[i]
            row["flops"] = self.lanes[i] * flops_per_lane[i]
            for name, value in row.items():
                totals[name] += value
                if line is not None and value:
                    per = by_line.setdefault(line, dict.fromkeys(COUNTER_NAMES, 0))
                    per[name] += value
        return Counters(totals=totals, by_line=dict(sorted(by_line.items())))
