"""Shadow state of shared memory, per 4-byte word (or byte), for race and initialisation
checks; "word" below means that unit.

Racecheck semantics under the CUDA memory model, with no intra-warp exemption: two
accesses to one word by different threads of a block, at least one a write, with no
barrier (or ``__syncwarp`` for threads of one warp) between them, are a hazard; which came
first says read-after-write, write-after-read or write-after-write. A thread reading its
own write is fine. Atomics neither race nor count as plain writes.

``state`` holds, per word: NEVER (no thread of the block ever wrote it: reading it is an
uninitialised read), CLEAN (written before the last barrier), or the id of the thread
that wrote it since. Reads are cheap: one gather, and the (words, threads, instruction)
of each read is appended to a log that a later write in the same interval checks for
write-after-read; a barrier clears both. A long interval folds the log into per-word
readers so that memory stays bounded."""

from __future__ import annotations

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

    def read(self, words: np.ndarray, threads: np.ndarray, pc: int) -> list[Hazard]:
        state = self.state[words]
        hazards = []
        if state.min() != CLEAN or state.max() != CLEAN:
            hazards += _first(state == NEVER, "uninitialized_shared_read", "uninitialised", words, threads,
                              None, None)
            raw = (state >= 0) & (state != threads)
            if raw.any():
                j = int(np.argmax(raw))
                hazards.append(Hazard("shared_race", "read-after-write", int(words[j]), int(threads[j]),
                                      int(state[j]), int(self.write_pc[words[j]]), int(raw.sum())))
        self.log.append((words, threads, pc))
        self.logged += words.size
        if self.logged > LOG_LIMIT:
            self._fold()
        return hazards

    def write(self, words: np.ndarray, threads: np.ndarray, pc: int) -> list[Hazard]:
        state = self.state[words]
        hazards = []
        waw = (state >= 0) & (state != threads)
        if waw.any():
            j = int(np.argmax(waw))
            hazards.append(Hazard("shared_race", "write-after-write", int(words[j]), int(threads[j]),
                                  int(state[j]), int(self.write_pc[words[j]]), int(waw.sum())))
        hazards += self._after_reads(words, threads)
        self.state[words] = threads
        clash = self.state[words] != threads
        if clash.any():  # two threads of this instruction wrote one word
            j = int(np.argmax(clash))
            hazards.append(Hazard("shared_race", "write-after-write", int(words[j]), int(threads[j]),
                                  int(self.state[words[j]]), pc, int(clash.sum())))
        self.write_pc[words] = pc
        return hazards

    def touch(self, words: np.ndarray) -> None:
        """An atomic wrote these words: they are initialised, and race with nothing."""
        state = self.state[words]
        self.state[words] = np.where(state == NEVER, CLEAN, state)

    def _after_reads(self, words, threads) -> list[Hazard]:
        hazards = []
        if self.reader is not None:
            readers = self.reader[words]
            war = (readers != NOBODY) & (readers != threads)
            if war.any():
                j = int(np.argmax(war))
                hazards.append(Hazard("shared_race", "write-after-read", int(words[j]), int(threads[j]),
                                      int(readers[j]), int(self.read_pc[words[j]]), int(war.sum())))
        if not self.log:
            return hazards
        if self._scratch is None:
            self._scratch = np.full(self.state.size, _FREE, np.int32)
        scratch = self._scratch
        scratch[words] = threads
        for read_words, readers, read_pc in self.log:
            writer = scratch[read_words]
            war = (writer != _FREE) & (writer != readers)
            if war.any():
                j = int(np.argmax(war))
                hazards.append(Hazard("shared_race", "write-after-read", int(read_words[j]), int(writer[j]),
                                      int(readers[j]), read_pc, int(war.sum())))
        scratch[words] = _FREE
        return hazards

    def _fold(self) -> None:
        if self.reader is None:
            self.reader = np.full(self.state.size, NOBODY, np.int32)
            self.read_pc = np.zeros(self.state.size, np.int32)
        for words, threads, pc in self.log:
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
        for words, threads, pc in self.log:
            keep = ~np.isin(words // self.words_per_block * 1024 + threads // 32, warp_keys)
            kept.append((words[keep], threads[keep], pc))
        self.log = kept
        if self.reader is not None:
            ours = (self.reader >= 0) & np.isin(slot * 1024 + self.reader // 32, warp_keys)
            self.reader[ours] = NOBODY


def _first(mask, kind, what, words, threads, other, other_pc) -> list[Hazard]:
    if not mask.any():
        return []
    j = int(np.argmax(mask))
    return [Hazard(kind, what, int(words[j]), int(threads[j]), other, other_pc, int(mask.sum()))]
