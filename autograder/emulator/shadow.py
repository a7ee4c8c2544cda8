"""Shadow state of shared memory, per 4-byte word (or byte), for race and initialisation
checks; "word" below means that unit.

Racecheck semantics under the CUDA memory model, with no intra-warp exemption: two
accesses to one word by different threads of a block, at least one a write, with no
barrier (or ``__syncwarp`` for threads of one warp) between them, are a hazard; which came
first says read-after-write, write-after-read or write-after-write. A thread reading its
own write is fine. Atomics do not race with each other, but an atomic and a plain access
by another thread to one word, with no barrier between, do, in either order
(``atomic-after-write``, ``atomic-after-read``, ``read-after-atomic``,
``write-after-atomic``). A store of the value a word holds, or of one value by every lane
of one store instruction that writes the word (whatever their warps), is no
write-after-write: no order changes the result (racecheck rates it harmless); lanes of one
store writing different values, or another thread's earlier store of a different value,
are.

A barrier for part of a block (``bar.sync 1, 64``) orders only the warps that took part in
it: each write (and each logged read, and the last atomic of a word) keeps the warps of its
block it is ordered before (``ordered``: a bit per warp), set for the waiting warps of each
barrier instance that the access's warp took part in, or that a warp it was already ordered
before took part in (``partial``).

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
    what: str  # "<this access>-after-<the other>" of read, write, atomic; or "uninitialised"
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
        self.atomic: np.ndarray | None = None  # per word: the thread of its atomics since the barrier
        self.atomic_pc: np.ndarray | None = None
        self.atomics = False  # some atomic since the last barrier
        self.ordered: np.ndarray | None = None  # per word: the warps its write is ordered before
        self.atomic_ordered: np.ndarray | None = None  # the same for its atomics
        self.partial = False  # a barrier for part of a block since the last whole one
        self.initialised: set[tuple[int, int]] = set()  # spans of words no block has left NEVER

    def read(
        self,
        rows: np.ndarray,
        threads: np.ndarray,
        per: int,
        pc: int,
        span: tuple[int, int] | None = None,
        strong: bool = False,
    ) -> list[Hazard]:
        """``span``: the words ``(first, last)`` of its block every lane reads within, when known:
        with no word written since the last barrier (no read-after-write) and none of the span
        NEVER written in any block (none ever is again), nothing is left to look at.
        ``strong``: a volatile, relaxed or acquire load, which no atomic races with."""
        if span is not None and not self.written and not self.atomics and self._initialised(span):
            self._log(rows, threads, per, pc, strong)
            return []
        state = _gather(self.state, rows, per)
        hazards = []
        if np.bitwise_and.reduce(state, axis=None) != CLEAN:  # CLEAN is all ones: not every word is
            hazards += _first(
                state == NEVER, "uninitialized_shared_read", "uninitialised", rows, threads, per, None, None
            )
            raw = self._unordered(state, self.ordered, rows, threads, per)
            hazards += _race(raw, "read-after-write", rows, threads, per, state.flat, self.write_pc)
        if not strong:
            hazards += self._after_atomics("read-after-atomic", rows, threads, per)
        self._log(rows, threads, per, pc, strong)
        return hazards

    def _unordered(self, by, ordered, rows, threads, per) -> np.ndarray:
        """Which of the words, accessed by thread ``by`` (gathered, (lanes, per)) since the
        barrier, are another thread's access not ordered before the lanes' ``threads``."""
        mine = _per_word(threads, per)
        other = (by >= 0) & (by != mine)
        if self.partial and ordered is not None:
            other &= ~_has_warp(_gather(ordered, rows, per), mine)
        return other

    def _after_atomics(self, what: str, rows, threads, per) -> list[Hazard]:
        """A plain access to words another thread updated atomically since the barrier."""
        if not self.atomics:
            return []
        by = _gather(self.atomic, rows, per)
        race = self._unordered(by, self.atomic_ordered, rows, threads, per) | (by == MANY)
        return _race(race, what, rows, threads, per, by.flat, self.atomic_pc)

    def _log(self, rows: np.ndarray, threads: np.ndarray, per: int, pc: int, strong: bool) -> None:
        """Remember a read for the writes of its interval (write-after-read), with the warps
        it is ordered before (none yet), and whether it is strong (no atomic races with it)."""
        self.log.append((rows, threads, per, pc, None, strong))
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
        self,
        rows: np.ndarray,
        threads: np.ndarray,
        per: int,
        pc: int,
        stored=None,
        distinct: bool = False,
        strong: bool = False,
    ) -> list[Hazard]:
        """``stored()``, when given and called before the store lands, returns the (lanes,
        per) words about to be written and those in memory: a word rewritten with the
        value it holds is no write-after-write (racecheck rates it harmless). ``distinct``:
        no two lanes write one word (the caller knows), so none of them clash. ``strong``: a
        volatile, relaxed or release store, which no atomic races with."""
        mine = _per_word(threads, per)
        hazards = []
        if self.written:  # some word was written since the last barrier: these, by another thread?
            state = _gather(self.state, rows, per)
            if state.max() >= 0:
                hazards += self._rewritten(state, rows, threads, per, stored)
        self.written = True
        hazards += self._after_reads(rows, threads, per, "write-after-read")
        if not strong:
            hazards += self._after_atomics("write-after-atomic", rows, threads, per)
        _scatter(self.state, rows, per, mine)
        if self.ordered is not None:
            _scatter(self.ordered, rows, per, 0)
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
        return _race(clash, "write-after-write", rows, threads, per, written.flat, pc)

    def _rewritten(self, state, rows, threads, per, stored) -> list[Hazard]:
        """Write-after-write: words another thread wrote since the last barrier."""
        waw = self._unordered(state, self.ordered, rows, threads, per)
        if waw.any() and stored is not None:
            new, old = stored()
            waw &= new.reshape(waw.shape) != old.reshape(waw.shape)
        return _race(waw, "write-after-write", rows, threads, per, state.flat, self.write_pc)

    def atomic_update(self, rows: np.ndarray, threads: np.ndarray, per: int, pc: int) -> list[Hazard]:
        """Lanes updated these words atomically: they are initialised; they race with another
        thread's plain write or read since the barrier, not with other atomics."""
        state = _gather(self.state, rows, per)
        hazards = []
        if self.written and state.max() >= 0:
            raw = self._unordered(state, self.ordered, rows, threads, per)
            hazards += _race(raw, "atomic-after-write", rows, threads, per, state.flat, self.write_pc)
        hazards += self._after_reads(rows, threads, per, "atomic-after-read")
        _scatter(self.state, rows, per, np.where(state == NEVER, CLEAN, state))
        if self.atomic is None:
            self.atomic = np.full(self.state.size, NOBODY, np.int32)
            self.atomic_pc = np.zeros(self.state.size, np.int32)
        _record(self.atomic, rows, threads, per)
        _scatter(self.atomic_pc, rows, per, pc)
        if self.atomic_ordered is not None:
            _scatter(self.atomic_ordered, rows, per, 0)
        self.atomics = True
        return hazards

    def _after_reads(self, rows, threads, per, what: str) -> list[Hazard]:
        """A write (``what``) to words another thread read since the barrier."""
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
                        what,
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
        atomic = what.startswith("atomic")
        for read_rows, readers, read_per, read_pc, ordered, strong in self.log:
            if strong and atomic:
                continue
            writer = _gather(scratch, read_rows, read_per)
            war = (writer != _FREE) & (writer != _per_word(readers, read_per))
            if ordered is not None and war.any():
                war &= ~_has_warp(_per_word(ordered, read_per), np.maximum(writer, 0))
            if war.any():
                j = int(np.argmax(war))
                hazards.append(
                    Hazard(
                        "shared_race",
                        what,
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
        for (
            rows,
            lane_threads,
            per,
            pc,
            _ordered,
            _strong,
        ) in self.log:  # folded: ordered before no warp, weak
            _record(self.reader, rows, lane_threads, per)
            _scatter(self.read_pc, rows, per, pc)
        self.log.clear()
        self.logged = 0

    def barrier(self) -> None:
        """Every live thread of the chunk passed a barrier: earlier accesses race no more."""
        self.written = False
        self.state[self.state >= 0] = CLEAN
        self.log.clear()
        self.logged = 0
        self.reader = None
        if self.atomics:
            self.atomic.fill(NOBODY)
            self.atomics = False
        self.partial = False

    def partial_barrier(self, slot: int, took_part: int, waited: int) -> None:
        """Warps ``took_part`` (a bit per warp) of block slot ``slot`` completed a barrier
        instance, of which warps ``waited`` waited at it (the others arrived, ``bar.arrive``):
        the accesses of the warps that took part, and those ordered before one of them, are now
        ordered before the waiting warps."""
        if not self.partial:
            self.ordered = np.zeros(self.state.size, np.uint32)
            self.atomic_ordered = np.zeros(self.state.size, np.uint32)
            self.partial = True
        block = slice(slot * self.words_per_block, (slot + 1) * self.words_per_block)
        _order(self.state[block], self.ordered[block], took_part, waited)
        if self.atomics:
            _order(self.atomic[block], self.atomic_ordered[block], took_part, waited)
        for k, (rows, threads, per, pc, ordered, strong) in enumerate(self.log):
            here = rows * per // self.words_per_block == slot
            if here.any():
                ordered = np.zeros(rows.size, np.uint32) if ordered is None else ordered
                _order(np.where(here, threads, NOBODY), ordered, took_part, waited)
                self.log[k] = (rows, threads, per, pc, ordered, strong)

    def sync_warps(self, warp_keys: np.ndarray) -> None:
        """``__syncwarp``: accesses by these warps (block slot * 1024 + warp) race no more."""
        wpb = self.words_per_block
        synced = _warp_table(warp_keys, self.state.size // wpb if wpb else 0)
        _release(self.state, synced, wpb, CLEAN)
        kept = []
        for rows, threads, per, pc, ordered, strong in self.log:  # a lane's words lie in one block
            keep = ~synced[_warp_place(rows * per // wpb, threads)]
            if keep.any():  # a read none of whose lanes is left checks nothing: dropped
                ordered = None if ordered is None else ordered[keep]
                kept.append((rows[keep], threads[keep], per, pc, ordered, strong))
        self.log = kept
        for by in (self.reader, self.atomic):
            if by is not None:
                _release(by, synced, wpb, NOBODY)


def _release(by: np.ndarray, synced: np.ndarray, words_per_block: int, free: int) -> None:
    """The words of ``by`` (per word: a thread of its block, or none) held by a thread of a
    warp ``synced`` (``_warp_table``) become ``free``. Only the words a thread holds are looked
    at: a tensor-core kernel's ``__syncwarp`` went over 73 000 words of shadow each time."""
    held = np.flatnonzero(by >= 0)
    if held.size:
        by[held[synced[held // words_per_block * 32 + by[held] // 32]]] = free


def _warp_table(warp_keys: np.ndarray, slots: int) -> np.ndarray:
    """A bool per warp of the chunk's ``slots`` blocks (at ``slot * 32 + warp``): is it one of
    ``warp_keys`` (``slot * 1024 + warp``)? Looked up where ``np.isin`` was 30% of a
    tensor-core kernel's launch; its last place, never set, is no thread's (``_warp_place``)."""
    slots = max(slots, int(warp_keys.max()) // 1024 + 1 if warp_keys.size else 0)
    table: np.ndarray = np.zeros(slots * 32 + 1, bool)
    table[warp_keys // 1024 * 32 + warp_keys % 1024] = True
    return table


def _warp_place(slot: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """Each access's warp in ``_warp_table``, from its block slot and thread; the table's last
    place where ``threads`` is no thread (NEVER, CLEAN, NOBODY, MANY)."""
    return np.where(threads >= 0, slot * 32 + threads // 32, -1)


def _record(by: np.ndarray, rows: np.ndarray, threads: np.ndarray, per: int) -> None:
    """Record ``threads`` (a lane's for its row) as the accessors of their words in ``by``:
    a word's thread where only it accessed the word, else MANY."""
    words, threads = _words(rows, threads, per)
    before = by[words]
    mine = np.where((before == NOBODY) | (before == threads), threads, MANY).astype(np.int32)
    by[words] = mine
    by[words[by[words] != mine]] = MANY  # two lanes of this access on one word


def _has_warp(ordered: np.ndarray, threads) -> np.ndarray:
    """Is the warp of each of ``threads`` among the warps ``ordered`` (a bit each) holds?"""
    return (ordered >> (np.asarray(threads) // 32).astype(np.uint32)) & 1 != 0


def _order(by: np.ndarray, ordered: np.ndarray, took_part: int, waited: int) -> None:
    """The accesses of one block by threads ``by`` (NOBODY, MANY: none, or not one thread)
    with their ``ordered`` warps: those by a warp in ``took_part``, or ordered before one,
    become ordered before ``waited`` (in place)."""
    warp = np.where(by >= 0, by // 32, 0).astype(np.uint32)
    joined = ((by >= 0) & ((took_part >> warp) & 1 != 0)) | (ordered & took_part != 0)
    ordered[joined] |= np.uint32(waited)


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
