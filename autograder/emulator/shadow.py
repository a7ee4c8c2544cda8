"""Shadow state of shared memory, per 4-byte word (or byte), for race and initialisation
checks; "word" below means that unit.

Racecheck semantics under the CUDA memory model, with no intra-warp exemption: two
accesses to one word by different threads of a block, at least one a write, with no
barrier (or ``__syncwarp`` for threads of one warp) between them, are a hazard; which came
first says read-after-write, write-after-read or write-after-write. A thread reading its
own write is fine. Atomics neither race nor count as plain writes.

``state`` holds, per word: NEVER (no thread of the block ever wrote it: reading it is an
uninitialised read), CLEAN (written before the last barrier), or the id of the thread
that wrote it since. Reads are cheap: one gather, and the (rows, threads, width,
instruction) of each read is appended to a log that a later write in the same interval
checks for write-after-read; a barrier clears both. A long interval folds the log into
per-word readers so that memory stays bounded.

An access is given as ``rows``, ``threads`` and ``per``: lane ``j`` touches the ``per``
words ``rows[j] * per ..`` (its access is aligned to its size), so a vector access is
checked on a (lanes, per) view of the shadow without building the list of its words.
Hazards name the first offending word in lane-then-word order and count words."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

NEVER = -2
CLEAN = -1
NOBODY = -1
MANY = -2
_FREE = -3
LOG_LIMIT = 1 << 22


@dataclass(frozen=True)
class Hazard:
    kind: str  # "shared_race" or "uninitialized_shared_read"
    what: str  # "read-after-write", "write-after-read", "write-after-write", "uninitialised"
    word: int  # the first offending word (index into the chunk's shared words)
    thread: int  # linear thread id (in its block) of the access being checked
    other: int | None  # the other thread, or MANY
    other_pc: int | None  # the other access's instruction
    count: int  # accesses with this hazard in this instruction


class SharedShadow:
    def __init__(self, words: int, words_per_block: int):
        self.words_per_block = words_per_block
        self.state = np.full(words, NEVER, np.int32)
        self.write_pc = np.zeros(words, np.int32)
        self.reader: np.ndarray | None = None
        self.read_pc: np.ndarray | None = None
        self.log: list[tuple[np.ndarray, np.ndarray, int]] = []
        self.logged = 0
        self._scratch: np.ndarray | None = None
        self.written = False  # some word written since the last barrier (a read may race with it)
        self.initialised: set[tuple[int, int]] = set()  # spans of words no block has left NEVER

    def read(
        self, rows: np.ndarray, threads: np.ndarray, per: int, pc: int, span: tuple[int, int] | None = None
    ) -> list[Hazard]:
        """``span``: the words ``(first, last)`` of its block every lane reads within, when known:
        with no word written since the last barrier (no read-after-write) and none of the span
        NEVER written in any block (none ever is again), nothing is left to look at."""
        if span is not None and not self.written and self._initialised(span):
            self._log(rows, threads, per, pc)
            return []
        state = _gather(self.state, rows, per)
        hazards = []
        if np.bitwise_and.reduce(state, axis=None) != CLEAN:  # CLEAN is all ones: not every word is
            hazards += _first(
                state == NEVER, "uninitialized_shared_read", "uninitialised", rows, threads, per, None, None
            )
            raw = (state >= 0) & (state != _per_word(threads, per))
            hazards += _race(raw, "read-after-write", rows, threads, per, state.flat, self.write_pc)
        self._log(rows, threads, per, pc)
        return hazards

    def _log(self, rows: np.ndarray, threads: np.ndarray, per: int, pc: int) -> None:
        """Remember a read for the writes of its interval (write-after-read)."""
        self.log.append((rows, threads, per, pc))
        self.logged += rows.size * per
        if self.logged > LOG_LIMIT:
            self._fold()

    def _initialised(self, span: tuple[int, int]) -> bool:
        if span not in self.initialised:
            first, last = span
            blocks = self.state[: self.state.size // self.words_per_block * self.words_per_block]
            if (blocks.reshape(-1, self.words_per_block)[:, first : last + 1] == NEVER).any():
                return False
            self.initialised.add(span)
        return True

    def write(
        self, rows: np.ndarray, threads: np.ndarray, per: int, pc: int, stored=None, distinct: bool = False
    ) -> list[Hazard]:
        """``stored()``, when given and called before the store lands, returns the (lanes,
        per) words about to be written and those in memory: a word rewritten with the
        value it holds is no write-after-write (racecheck rates it harmless). ``distinct``:
        no two lanes write one word (the caller knows), so none of them clash."""
        mine = _per_word(threads, per)
        hazards = []
        if self.written:  # some word was written since the last barrier: these, by another thread?
            state = _gather(self.state, rows, per)
            if state.max() >= 0:
                hazards += self._rewritten(state, rows, threads, per, stored)
        self.written = True
        hazards += self._after_reads(rows, threads, per)
        _scatter(self.state, rows, per, mine)
        if not distinct:
            hazards += self._clashes(rows, threads, per, pc, mine, stored)
        _scatter(self.write_pc, rows, per, pc)
        return hazards

    def _clashes(self, rows, threads, per, pc, mine, stored) -> list[Hazard]:
        """Write-after-write within one store: two threads of it wrote one word (differently)."""
        written = _gather(self.state, rows, per)
        clash = written != mine
        if clash.any() and stored is not None:
            clash &= _differs_from_last(stored()[0], rows, per, self.state.size).reshape(clash.shape)
        return _race(
            clash, "write-after-write", rows, threads, per, written.flat, np.full(self.state.size, pc)
        )

    def _rewritten(self, state, rows, threads, per, stored) -> list[Hazard]:
        """Write-after-write: words another thread wrote since the last barrier."""
        waw = (state >= 0) & (state != _per_word(threads, per))
        if waw.any() and stored is not None:
            new, old = stored()
            waw &= new.reshape(waw.shape) != old.reshape(waw.shape)
        return _race(waw, "write-after-write", rows, threads, per, state.flat, self.write_pc)

    def touch(self, rows: np.ndarray, per: int) -> None:
        """An atomic wrote these words: they are initialised, and race with nothing."""
        state = _gather(self.state, rows, per)
        _scatter(self.state, rows, per, np.where(state == NEVER, CLEAN, state))

    def _after_reads(self, rows, threads, per) -> list[Hazard]:
        hazards = []
        if self.reader is not None:
            readers = _gather(self.reader, rows, per)
            war = (readers != NOBODY) & (readers != _per_word(threads, per))
            if war.any():
                j = int(np.argmax(war))
                word = _word(rows, per, j)
                hazards.append(
                    Hazard(
                        "shared_race",
                        "write-after-read",
                        word,
                        int(threads[j // per]),
                        int(readers.flat[j]),
                        int(self.read_pc[word]),
                        int(war.sum()),
                    )
                )
        if not self.log:
            return hazards
        if self._scratch is None:
            self._scratch = np.full(self.state.size, _FREE, np.int32)
        scratch = self._scratch
        _scatter(scratch, rows, per, _per_word(threads, per))
        for read_rows, readers, read_per, read_pc in self.log:
            writer = _gather(scratch, read_rows, read_per)
            war = (writer != _FREE) & (writer != _per_word(readers, read_per))
            if war.any():
                j = int(np.argmax(war))
                hazards.append(
                    Hazard(
                        "shared_race",
                        "write-after-read",
                        _word(read_rows, read_per, j),
                        int(writer.flat[j]),
                        int(readers[j // read_per]),
                        read_pc,
                        int(war.sum()),
                    )
                )
        _scatter(scratch, rows, per, _FREE)
        return hazards

    def _fold(self) -> None:
        if self.reader is None:
            self.reader = np.full(self.state.size, NOBODY, np.int32)
            self.read_pc = np.zeros(self.state.size, np.int32)
        for rows, lane_threads, per, pc in self.log:
            words, threads = _words(rows, lane_threads, per)
            before = self.reader[words]
            mine = np.where((before == NOBODY) | (before == threads), threads, MANY).astype(np.int32)
            self.reader[words] = mine
            clash = self.reader[words] != mine
            self.reader[words[clash]] = MANY
            self.read_pc[words] = pc
        self.log.clear()
        self.logged = 0

    def barrier(self) -> None:
        """Every live thread of the chunk passed a barrier: earlier accesses race no more."""
        self.written = False
        self.state[self.state >= 0] = CLEAN
        self.log.clear()
        self.logged = 0
        self.reader = None

    def sync_warps(self, warp_keys: np.ndarray) -> None:
        """``__syncwarp``: accesses by these warps (block slot * 1024 + warp) race no more."""
        slot = np.arange(self.state.size) // self.words_per_block
        mine = (self.state >= 0) & np.isin(slot * 1024 + self.state // 32, warp_keys)
        self.state[mine] = CLEAN
        kept = []
        for rows, threads, per, pc in self.log:  # a lane's words lie in one block
            keep = ~np.isin(rows * per // self.words_per_block * 1024 + threads // 32, warp_keys)
            kept.append((rows[keep], threads[keep], per, pc))
        self.log = kept
        if self.reader is not None:
            ours = (self.reader >= 0) & np.isin(slot * 1024 + self.reader // 32, warp_keys)
            self.reader[ours] = NOBODY


def _gather(array: np.ndarray, rows: np.ndarray, per: int) -> np.ndarray:
    """The words of each lane's row, (lanes, per); gathered as one wide item per lane,
    which numpy does ten times faster than a 2-D fancy index."""
    if per == 1:
        return array[rows]
    return array.view(wide(array.itemsize * per))[rows].view(array.dtype).reshape(-1, per)


def _scatter(array: np.ndarray, rows: np.ndarray, per: int, values) -> None:
    """Store a scalar, per-word (lanes, per) or broadcast (lanes, 1) values at each lane's
    row; where two lanes share a row the later lane's values stay, as in ``array[i] = v``."""
    if per == 1:
        array[rows] = values
        return
    item = wide(array.itemsize * per)
    full = np.ascontiguousarray(np.broadcast_to(values, (rows.size, per)), array.dtype)
    array.view(item)[rows] = full.view(item).reshape(-1)


@functools.cache
def wide(nbytes: int) -> np.dtype:
    """One opaque item of ``nbytes`` bytes: what numpy gathers fastest."""
    return np.dtype(f"V{nbytes}")


def _per_word(values: np.ndarray, per: int) -> np.ndarray:
    """Per-lane values, broadcast over each lane's ``per`` words."""
    return values if per == 1 else values[:, None]


def _differs_from_last(new: np.ndarray, rows: np.ndarray, per: int, size: int) -> np.ndarray:
    """Per word of ``new`` (lanes, per): does it differ from the value the last lane writing
    that word leaves there?"""
    words, _ = _words(rows, rows, per)
    last = np.zeros(size, new.dtype)
    last[words] = new.reshape(-1)
    return last[words] != new.reshape(-1)


def _race(mask, what: str, rows, threads, per: int, other, other_pc) -> list[Hazard]:
    """The first access ``mask`` marks as a race ``what``: the other thread at the same flat
    position of ``other``, its instruction at the word in ``other_pc`` (or that instruction);
    counted over ``mask``."""
    if not mask.any():
        return []
    j = int(np.argmax(mask))
    word = _word(rows, per, j)
    other_thread = int(other[j])
    at = other_pc if isinstance(other_pc, int) else int(other_pc[word])
    return [Hazard("shared_race", what, word, int(threads[j // per]), other_thread, at, int(mask.sum()))]


def _word(rows: np.ndarray, per: int, j: int) -> int:
    """The word at flat position ``j`` (lane ``j // per``, its word ``j % per``)."""
    return int(rows[j // per]) * per + j % per


def _words(rows: np.ndarray, threads: np.ndarray, per: int) -> tuple[np.ndarray, np.ndarray]:
    """Every word of the access, lane by lane, and the thread of each."""
    if per == 1:
        return rows, threads
    return (rows[:, None] * per + np.arange(per)).reshape(-1), np.repeat(threads, per)


def _first(mask, kind, what, rows, threads, per, other, other_pc) -> list[Hazard]:
    if not mask.any():
        return []
    j = int(np.argmax(mask))
    return [Hazard(kind, what, _word(rows, per, j), int(threads[j // per]), other, other_pc, int(mask.sum()))]
