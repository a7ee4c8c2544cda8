"""One memory instruction's traffic counted (``counters.py`` says what is counted and how): its
requests, values and bytes, and the sectors (global) or bank wavefronts and conflicts (shared)
its lanes' addresses make, in the space each address lies in (a generic address: its window's).

A request of every lane of a small chunk counts its sectors or wavefronts once per address
pattern (``patterns.Pattern.counts``): they depend on the addresses relative to the first
lane's, on which lanes form a warp (the block size) and, for sectors, on where the first address
falls in its sector."""

from __future__ import annotations

import numpy as np

from autograder.emulator.counters import sectors, warp_count, whole_warps
from autograder.emulator.isa import Instr
from autograder.emulator.memory import SPACES, by_window
from autograder.emulator.patterns import Pattern

# (space, write) -> the counter names of a request: requests, values, bytes, sectors,
# wavefronts, conflicts
_EVENTS = {
    (space, write): tuple(
        f"{space}_{'store' if write else 'load'}_{what}"
        for what in ("requests", "values", "bytes", "sectors", "wavefronts", "conflicts")
    )
    for space in SPACES
    for write in (False, True)
}


class Traffic:
    """The counters of instruction ``ins`` on ``chunk`` (a ``chunk.Chunk``: the launch it runs
    now, ``chunk.m``, tallies them) in state space ``space`` (``generic``: by window); nothing
    where not ``counted`` (the constant cache is no global-memory traffic)."""

    def __init__(self, ins: Instr, chunk, space: str, counted: bool):
        self.ins = ins
        self.ch = chunk
        self.space = space
        self.counted = counted

    def count(
        self,
        idx: np.ndarray | None,
        a: np.ndarray,
        total: int,
        vec: int,
        write: bool,
        words: np.ndarray | None = None,
        aligned: bool = False,
        seen: Pattern | None = None,
        into: dict | None = None,
        per_warp: int = 0,
    ) -> None:
        """Requests, bytes, sectors or wavefronts (and values: elements of the instruction's own
        type, which nothing graded reads) of one instruction; ``words`` are
        the lanes' shared words when the caller has them (any block offset: banks repeat);
        ``aligned``: the caller found every address aligned to ``total``; ``seen``: their
        ``Pattern``, every lane's of the chunk or lanes ``idx``'s alone (its counts worked out once);
        ``into``: where to add them (default: the instruction's tally); ``per_warp``: the
        entries of ``idx`` come in whole warps of this many each (a wmma tile's elements, its
        lanes repeated), else one entry a lane."""
        if not self.counted:
            return
        if self.space == "generic":
            for _sub, sub_idx, rel, space in by_window(idx, a):
                self._count(space, sub_idx, rel, total, vec, write)
            return
        self._count(self.space, idx, a, total, vec, write, words, aligned, seen, into, per_warp)

    def count_atomic(self, idx: np.ndarray | None, a: np.ndarray, size: int) -> None:
        """An atomic (``atom`` or ``red``) reads and writes its address: a load request and
        a store request of ``size`` bytes a lane (see ``counters.py``)."""
        self.count(idx, a, size, 1, False)
        self.count(idx, a, size, 1, True)

    def _count(
        self,
        space: str,
        idx: np.ndarray | None,
        a: np.ndarray,
        total: int,
        vec: int,
        write: bool,
        words: np.ndarray | None = None,
        aligned: bool = False,
        seen: Pattern | None = None,
        into: dict | None = None,
        per_warp: int = 0,
    ) -> None:
        """``count`` in ``space``: only global and shared memory count."""
        if space != "shared" and space != "global":  # local memory: not counted
            return
        ch = self.ch
        events = ch.m.tally.events[self.ins.index] if into is None else into
        lanes = a.size
        warps = ch.warp_of if idx is None else ch.warp_of[idx]
        requests_, values_, bytes_, sectors_, wavefronts_, conflicts_ = _EVENTS[space, write]
        events[requests_] += ch.n_warps if idx is None else warp_count(warps)
        events[values_] += lanes * vec  # elements of the instruction's type: never graded
        events[bytes_] += lanes * total
        full = bool(per_warp) or (ch.full_warps if idx is None else whole_warps(warps))
        row = per_warp or 32
        if space == "shared":
            wavefronts, minimum = self._wavefronts(a, total, warps, full, words, aligned, seen, row)
            events[wavefronts_] += wavefronts
            events[conflicts_] += wavefronts - minimum
            return
        if seen is None:
            count = sectors(warps, a, total, full, aligned, row)
        else:  # sectors: the pattern, where the first address falls in its sector, the block size
            key = ("sectors", total, int(a[0]) & 31, ch.bs, aligned)
            found = seen.counts.get(key)
            if found is None:
                found = seen.counts[key] = sectors(warps, a, total, full, aligned)
            count = found
        events[sectors_] += count

    def _wavefronts(
        self,
        a: np.ndarray,
        total: int,
        warps: np.ndarray,
        full: bool,
        words: np.ndarray | None,
        aligned: bool,
        seen: Pattern | None,
        row: int,
    ) -> tuple[int, int]:
        """A shared request's wavefronts, and the fewest its warps' lanes could take (``row``:
        the entries of each of its warps, where ``full``)."""
        words_per_lane = max(1, total // 4)
        words = a >> 2 if words is None else words
        if seen is None or not aligned or total < 4:
            return self.ch.m.banks.wavefronts(warps, words, full, words_per_lane, row)
        # a warp's wavefronts depend on its words relative to its first: on the pattern, the
        # block size (which lanes form a warp) and the words per lane, once aligned to 4 bytes
        key = ("banks", words_per_lane, self.ch.bs)
        counts = seen.counts.get(key)
        if counts is None:
            counts = seen.counts[key] = self.ch.m.banks.wavefronts(warps, words, full, words_per_lane)
        return counts
