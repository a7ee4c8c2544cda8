"""Traffic counting, per warp request, as the lectures and Nsight Compute count it.

Global: a request is one warp-wide instruction; its sectors are the distinct 32-byte
segments its active lanes touch. Shared: 32 banks of 4 bytes; a request costs as many
wavefronts as the largest number of distinct 4-byte words falling in one bank (one word
read by many lanes is a broadcast, free); wavefronts beyond the minimum are conflicts.

Every instruction that moves data is counted in the space its address really lies in:
``ld``/``ldu``/``st``, ``cp.async`` (a global load and a shared store), ``wmma.load`` and
``wmma.store``, and the atomics. An atomic read-modify-write (``atom``, and ``red``, which
returns nothing to the thread but reads its address all the same) moves its word from memory
to the unit that updates it (the L2 for global memory, the SM for shared) and back: it counts
as one load request and one store request of its width, with the bytes and sectors or
wavefronts an ``ld`` and an ``st`` of that width at those addresses would count.
``atomicAdd(&x[i], 0)`` is a load of ``x[i]`` (and a store). Not counted: ``ld.const`` of
``__constant__`` variables (the constant cache), ``ld.param`` of the kernel's arguments, local
memory; an explicit space that does not reach the address (``ld.const`` of a global buffer,
``ld.param`` through a pointer) is a finding, not an uncounted read (``access.py``).

Traffic is bytes: what a request moves is its active lanes' bytes, and its sectors and
wavefronts follow from their addresses and widths, whatever type the instruction names (16
bytes read as ``ld.v4.f32`` or as ``ld.v2.u64`` count the same). The ``*_values`` counted here
are each instruction's elements of its own type (``ld.v2.u64``: 2 a lane), shown per line by
``profile`` but never graded: the values of the traffic items and the ledger are bytes over
the assignment's element size, worked out by the grading (``ledger.graded_totals``), which
knows the spec."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from operator import mul

import numpy as np

from autograder.contract import COUNTER_NAMES, Counters


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


def sectors(
    warps: np.ndarray,
    addr: np.ndarray,
    nbytes: int,
    full_warps: bool = False,
    aligned: bool = False,
    per_warp: int = 32,
) -> int:
    """Distinct 32-byte sectors per warp; ``aligned``: every address is a multiple of ``nbytes``
    (the caller checked); ``full_warps``: each warp's are ``per_warp`` consecutive addresses (a
    lane's each, or a wmma tile's elements)."""
    first = addr >> 5
    row = per_warp if full_warps and addr.size % per_warp == 0 else None
    if nbytes <= 32 and (aligned or not int(np.bitwise_or.reduce(addr)) & (nbytes - 1)):
        return distinct_per_warp(warps, first, row)  # aligned: each lane in one sector
    last = (addr + (nbytes - 1)) >> 5
    if nbytes <= 32 and (first == last).all():
        return distinct_per_warp(warps, first, row)
    if row is not None:
        both = np.concatenate([first.reshape(-1, row), last.reshape(-1, row)], axis=1)
        return distinct_per_warp(warps, both.reshape(-1), 2 * row)
    order = np.argsort(np.concatenate([warps, warps]), kind="stable")
    return distinct_per_warp(np.concatenate([warps, warps])[order], np.concatenate([first, last])[order])


FEW_WARPS = 16  # requests of up to this many full warps' lanes: one memo lookup for the request
MEMO_LIMIT = 1 << 12  # memoised patterns (a request's key is 4 KiB at most); then it starts over
# (pattern, its dtype, words per lane, entries per warp) -> (wavefronts, minimum): a pure function of the
# pattern, so one memo serves every launch of the process (most of a kernel's patterns recur in every case)
Key = tuple[bytes, str, int, int]
_MEMO: dict[Key, tuple[int, int]] = {}


class BankModel:
    """Wavefronts of shared-memory requests, memoised by their address patterns (relative
    to each warp's first word, which is all a warp's count depends on)."""

    def __init__(self, memo: dict[Key, tuple[int, int]] = _MEMO):
        self._memo = memo

    def wavefronts(
        self,
        warps: np.ndarray,
        words: np.ndarray,
        full_warps: bool,
        words_per_lane: int = 1,
        per_warp: int = 32,
    ) -> tuple[int, int]:
        """(wavefronts, minimum wavefronts) summed over the warps of one request; each lane
        reads ``words_per_lane`` consecutive words from ``words``; ``full_warps``: each warp's
        are ``per_warp`` consecutive entries (a lane's each, or a wmma tile's elements)."""
        if full_warps and words.size % per_warp == 0 and words.size:
            rows = words.reshape(-1, per_warp)
            rel = rows - rows[:, :1]  # a warp's count depends only on its words relative to one
            if rel.size <= FEW_WARPS * 32:
                return self._request(rel, words_per_lane)
            if (rel == rel[0]).all():
                count, minimum = self._row(rel[0], words_per_lane)
                return count * rows.shape[0], minimum * rows.shape[0]
        if warps.size and warps[0] == warps[-1]:  # some lanes of one warp (a halo, a guard)
            return self._row(words - words[0], words_per_lane)
        if words_per_lane > 1:
            words = (words[:, None] + np.arange(words_per_lane)).reshape(-1)
            warps = np.repeat(warps, words_per_lane)
        return self._general(warps, words)

    def _request(self, rel: np.ndarray, words_per_lane: int) -> tuple[int, int]:
        """A few full warps, each row of ``rel`` one warp's words relative to its first."""
        key = (rel.tobytes(), rel.dtype.char, words_per_lane, rel.shape[1])
        counts = self._memo.get(key)
        if counts is None:
            rows = [self._row(r, words_per_lane) for r in rel]
            counts = self._remember(key, (sum(c for c, _ in rows), sum(m for _, m in rows)))
        return counts

    def _row(self, rel: np.ndarray, words_per_lane: int) -> tuple[int, int]:
        """The lanes of one warp, ``rel`` their words relative to the first one's."""
        key = (rel.tobytes(), rel.dtype.char, words_per_lane, rel.size)
        counts = self._memo.get(key)
        if counts is None:
            every = (rel[:, None] + np.arange(words_per_lane)).reshape(-1)
            counts = self._remember(key, _row_wavefronts(every))
        return counts

    def _remember(self, key: Key, counts: tuple[int, int]) -> tuple[int, int]:
        if len(self._memo) >= MEMO_LIMIT:  # data-dependent addresses: a new pattern each time
            self._memo.clear()
        self._memo[key] = counts
        return counts

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


class LineRows:
    """The counters' rows of a kernel, worked out once per kernel from ``line_of`` (each
    instruction's source line, -1 for none) and ``flops_per_lane``: the distinct lines in order
    (``numbers``), the instructions of each (``members[k]``) with their flops per lane
    (``flops[k]``; empty where none does any), so that a launch sums its counts per
    instruction by line without a pass over every line for every instruction."""

    def __init__(self, line_of: np.ndarray, flops_per_lane: np.ndarray):
        self.line_of: list[int] = line_of.tolist()
        numbers, where = np.unique(line_of, return_inverse=True)
        self.numbers: list[int] = numbers.tolist()
        order = np.argsort(where, kind="stable")
        ends: list[int] = np.bincount(where, minlength=numbers.size).cumsum().tolist()
        members = [order[s:e] for s, e in pairwise([0, *ends])]
        self.members: list[list[int]] = [m.tolist() for m in members]
        self.flops = [tuple(flops_per_lane[m].tolist()) if flops_per_lane[m].any() else () for m in members]

    def sums(self, lanes: list[int], warps: list[int]) -> list[tuple[int, int, int]]:
        """Per line: the lane instructions, warp instructions and flops of its instructions
        (``lanes`` and ``warps``: each one's; flops: its lanes times its flops per lane)."""
        lane, warp = lanes.__getitem__, warps.__getitem__
        return [
            (sum(map(lane, members)), sum(map(warp, members)), sum(map(mul, map(lane, members), flops)))
            for members, flops in zip(self.members, self.flops, strict=True)
        ]


class Tally:
    """Counters per instruction, summed to per-line and total :class:`Counters` at the end."""

    def __init__(self, n_instructions: int):
        self.lanes = [0] * n_instructions
        self.warps = [0] * n_instructions
        # per instruction that moved data or passed a barrier: its events
        self.events: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, index: int, name: str, value: int) -> None:
        self.events[index][name] += value

    def counters(self, rows: LineRows) -> Counters:
        """Per source line (lines that counted nothing left out, and the instructions of no
        line, which count in the total only) and in total."""
        sums = rows.sums(self.lanes, self.warps)
        moved = self._moved_by_line(rows.line_of)
        totals = _row([sum(column) for column in zip(*sums, strict=True)] if sums else (0, 0, 0))
        for events in moved.values():
            for name, value in events.items():
                totals[name] += value
        by_line = {}
        for line, counts in zip(rows.numbers, sums, strict=True):  # in order (np.unique)
            events = moved.get(line, {})
            if line >= 0 and (any(counts) or any(events.values())):
                row = by_line[line] = _row(counts)
                row.update(events)
        return Counters(totals=totals, by_line=by_line)

    def _moved_by_line(self, line_of: list[int]) -> dict[int, dict[str, int]]:
        """The events summed per source line."""
        moved: dict[int, dict[str, int]] = {}
        for i, events in self.events.items():
            line = moved.setdefault(line_of[i], {})
            for name, value in events.items():
                line[name] = line.get(name, 0) + value
        return moved


_ZEROS = dict.fromkeys(COUNTER_NAMES, 0)


def _row(counts) -> dict[str, int]:
    """A row of every counter (``COUNTER_NAMES``), zero but the lane and warp instructions and
    flops (``counts``)."""
    row = _ZEROS.copy()
    row["lane_instructions"], row["warp_instructions"], row["flops"] = counts
    return row
