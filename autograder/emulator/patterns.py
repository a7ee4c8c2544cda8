"""What a memory request's addresses are worked out once for, so that a small launch pays for
its bounds, counters and shadow rows once per request and not once per instruction it runs.

``Pattern``: the addresses of one request of every lane of a chunk relative to its first
lane's (extent, alignment, bank wavefronts, sectors), memoised for the whole process by that
pattern (``pattern``; a chunk of more than ``PATTERN_LANES`` lanes by its ends, compared whole):
a loop moves a request's first address but rarely its pattern.
``Resolved``: where a shared request of every lane lands, memoised per instruction by its exact
addresses (``access.Access.resolve``): a loop over a tile makes the same request trip after trip."""

from __future__ import annotations

from typing import Any

import numpy as np

PATTERN_LANES = 2048  # requests of up to this many lanes are memoised by their pattern
PATTERN_LIMIT = 1 << 8  # memoised patterns (16 KiB each at most); then the memo starts over
KEPT_LANES = 1 << 15  # larger requests of up to this many lanes are memoised by their ends (``_large``)
LARGE_LIMIT = 32  # memoised patterns of larger requests (0.5 MiB each at most); then it starts over
ENDS = 256  # bytes of a larger request's key at each end that its memo is keyed by


class Pattern:
    """The addresses of one request relative to its first lane's: their extent and alignment,
    and what its counters make of them (bank wavefronts, sectors), each worked out once. A loop
    moves a request's first address but rarely its pattern, so a small launch pays for its
    bounds and counters once per pattern, not once per instruction it runs (``pattern``)."""

    __slots__ = ("bits", "counts", "high", "low", "rel")

    def __init__(self, rel: np.ndarray):
        self.rel = rel
        self.low, self.high = int(rel.min()), int(rel.max())
        self.bits = int(np.bitwise_or.reduce(rel))  # the low bits any lane adds to the first's
        self.counts: dict[tuple, Any] = {}  # wavefronts, sectors, distinct: by what they depend on

    def inside_aligned(self, first: int, low: int, last: int, total: int) -> bool:
        """Every address in [low, last] and a multiple of ``total``, the first lane's at ``first``."""
        return low <= first + self.low and first + self.high <= last and not (first | self.bits) & (total - 1)

    def span(self, first: int, total: int, shift: int) -> tuple[int, int]:
        """The first and last shadow unit (``1 << shift`` bytes) any lane's ``total`` bytes touch."""
        return (first + self.low) >> shift, (first + self.high + total - 1) >> shift

    def distinct(self, block: int) -> bool:
        """Do no two lanes of one block (``block`` lanes each) share an address?"""
        key = ("distinct", block)
        found = self.counts.get(key)
        if found is None:
            lanes = np.sort(self.rel.reshape(-1, block), axis=1)
            found = self.counts[key] = not (lanes[:, 1:] == lanes[:, :-1]).any()
        return found


_PATTERNS: dict[bytes, Pattern] = {}
_LARGE: dict[tuple[int, bytes, bytes], tuple[bytes, Pattern]] = {}  # by _large's ends: (key, pattern)


def pattern(a: np.ndarray, last: list | None = None) -> Pattern | None:
    """The memoised pattern of the addresses of every lane of a chunk of up to ``KEPT_LANES``
    lanes (None for a larger one); ``last``: the caller's ``[key, pattern]`` of its last request,
    kept up to date (a loop keeps its pattern: equal keys compare without a hash)."""
    if a.size > KEPT_LANES:
        return None
    rel = a - a[0]
    key = rel.tobytes()
    if last is not None and key == last[0]:
        return last[1]
    found = _small(key, rel) if a.size <= PATTERN_LANES else _large(key, rel)
    if last is not None:
        last[:] = key, found
    return found


def _small(key: bytes, rel: np.ndarray) -> Pattern:
    found = _PATTERNS.get(key)
    if found is None:
        if len(_PATTERNS) >= PATTERN_LIMIT:
            _PATTERNS.clear()
        found = _PATTERNS[key] = Pattern(rel)
    return found


def _large(key: bytes, rel: np.ndarray) -> Pattern:
    """A larger request's pattern, memoised by its size and its key's ends and compared whole:
    a key of its size costs more to hash than to compare."""
    ends = (len(key), key[:ENDS], key[-ENDS:])
    kept = _LARGE.get(ends)
    if kept is not None and kept[0] == key:
        return kept[1]
    if len(_LARGE) >= LARGE_LIMIT:
        _LARGE.clear()
    found = Pattern(rel)
    _LARGE[ends] = key, found
    return found


def some_lanes_pattern(idx: np.ndarray, a: np.ndarray, last: list) -> Pattern | None:
    """The pattern of the addresses ``a`` of lanes ``idx`` (some of a chunk's; None past
    ``KEPT_LANES``), kept in ``last``, the caller's ``[lanes, their bytes, key, pattern]``, while
    the same lanes (one array: the group of a loop's trips; or equal lanes: the next launch in a
    kept chunk, ``chunk.Chunk.acquire``, whose lanes are the same threads) make requests of one
    pattern. Its counts are those lanes' alone: it is never shared, and ``Pattern.distinct``
    (whole blocks) means nothing."""
    if a.size > KEPT_LANES:
        return None
    rel = a - a[0]
    key = rel.tobytes()
    if key == last[2] and (idx is last[0] or _same_lanes(idx, last)):
        last[0] = idx
        return last[3]
    found = Pattern(rel)
    last[:] = idx, idx.tobytes(), key, found
    return found


def _same_lanes(idx: np.ndarray, last: list) -> bool:
    """Are lanes ``idx`` those ``last`` kept (another array of the same lanes)?"""
    return idx.size == last[0].size and idx.tobytes() == last[1]


class Resolved:
    """Where every lane of one shared request lands, all inside one variable and aligned: byte
    offsets in the chunk's shared memory (``off``), elements of the access's type (``el``), the
    counts it adds (``events``), its ``Pattern``, and its shadow rows (``ShadowCheck.rows``)
    and span of units (``Pattern.span``)."""

    __slots__ = ("el", "events", "off", "per", "rows", "seen", "span")

    def __init__(
        self,
        off: np.ndarray,
        el: np.ndarray,
        events: tuple[tuple[str, int], ...],
        seen: Pattern,
        shadow: tuple[np.ndarray, int],
        span: tuple[int, int],
    ):
        self.off, self.el, self.events, self.seen = off, el, events, seen
        (self.rows, self.per), self.span = shadow, span


def inside_aligned(a: np.ndarray, last: int, total: int, first: int = 0) -> bool:
    """Every address in [first, last] and a multiple of ``total`` (cheap reductions only)."""
    return (
        last >= first
        and int(a.min()) >= first
        and int(a.max()) <= last
        and not int(np.bitwise_or.reduce(a)) & (total - 1)
    )
