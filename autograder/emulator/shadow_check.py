"""One memory instruction's shared-memory words checked against the shadow (``shadow.py``) and
recorded there: which units each lane reads or writes (its row of ``per`` units: 4-byte words,
or bytes for a kernel with narrow shared accesses), what a store writes over (for a
write-after-write of the same value, which is no race), and whether the access is a strong one
(volatile, relaxed, acquire, release: it does not race with an atomic). What the shadow finds
is reported (``memory_findings.AccessFindings.hazard``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from autograder.emulator.isa import Instr
from autograder.emulator.memory import SharedMemory
from autograder.emulator.memory_findings import AccessFindings
from autograder.emulator.patterns import Pattern, Resolved

_STRONG = frozenset(("volatile", "relaxed", "acquire", "release"))

Stored = Callable[[], tuple[np.ndarray, np.ndarray]]  # () -> (the units written, those they replace)


class ShadowCheck:
    """The shadow's checks of instruction ``ins`` on ``chunk`` (a ``chunk.Chunk``: its shared
    memory, ``chunk.shared``, is the launch's), its hazards reported to ``findings``."""

    def __init__(self, ins: Instr, chunk, findings: AccessFindings):
        self.ins = ins
        self.ch = chunk
        self.findings = findings
        self.strong = _strong(ins)

    def check(
        self,
        idx: np.ndarray | None,
        pos: np.ndarray | None,
        off: np.ndarray,
        total: int,
        how: str,
        words: np.ndarray | None = None,
        values: Sequence | None = None,
        seen: Pattern | None = None,
        first: int = 0,
    ) -> None:
        """Check and record the shared words lanes ``idx[pos]`` read or wrote (``how``);
        a store calls it before it lands, with the ``values`` (one per vector element);
        ``seen``: the pattern of every lane's address, the first lane's at ``first``."""
        ch = self.ch
        if idx is None and pos is None:
            threads = ch.tid32
        else:
            lanes = ch.all_lanes if idx is None else idx
            threads = ch.tid32[lanes if pos is None else lanes[pos]]
        rows, per = self.rows(off, total, words)
        span = seen.span(first, total, ch.shared.unit_shift) if seen is not None and how == "read" else None
        distinct = seen is not None and how == "write" and seen.distinct(ch.bs)
        self._check(threads, rows, per, off, how, values, span, distinct)

    def check_resolved(self, known: Resolved, how: str, values: Sequence | None = None) -> None:
        """``check`` for every lane of a resolved request (``access.Access.resolve``)."""
        distinct = how == "write" and known.seen.distinct(self.ch.bs)
        self._check(self.ch.tid32, known.rows, known.per, known.off, how, values, known.span, distinct)

    def rows(self, off: np.ndarray, total: int, words: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """Each lane's row of ``per`` shadow units (the access is aligned to its size), and ``per``."""
        shift = self.ch.shared.unit_shift
        if words is None or shift != 2:
            words = off >> shift
        per = max(1, total >> shift)  # units per lane, a power of two
        return (words if per == 1 else words >> (per.bit_length() - 1)), per

    def _check(
        self,
        threads: np.ndarray,
        rows: np.ndarray,
        per: int,
        off: np.ndarray,
        how: str,
        values: Sequence | None,
        span: tuple[int, int] | None,
        distinct: bool,
    ) -> None:
        shadow = self.ch.shared.shadow
        if how == "atomic":
            hazards = shadow.atomic_update(rows, threads, per, self.ins.index)
        elif how == "read":
            hazards = shadow.read(rows, threads, per, self.ins.index, span, self.strong)
        else:
            stored = None if values is None else _stored_words(self.ch.shared, values, off, rows, per)
            hazards = shadow.write(rows, threads, per, self.ins.index, stored, distinct, self.strong)
        for hazard in hazards:
            self.findings.hazard(hazard)


def _strong(ins: Instr) -> bool:
    """A volatile, relaxed, acquire or release load or store: the memory model's strong
    access, which does not race with an atomic (a spin on a flag another thread sets with one)."""
    return not _STRONG.isdisjoint(ins.mods)


def _stored_words(
    shared: SharedMemory, values: Sequence, off: np.ndarray, rows: np.ndarray, per: int
) -> Stored:
    """A lazy ``() -> (new, old)``: the shadow units a store writes and those it replaces,
    each (lanes, per), for the same-value test of a write-after-write."""
    unit = np.dtype(f"u{1 << shared.unit_shift}")

    def stored() -> tuple[np.ndarray, np.ndarray]:
        lanes = [np.broadcast_to(np.asarray(v), off.shape) for v in values]
        new = np.ascontiguousarray(np.stack(lanes, axis=1)).view(np.uint8).view(unit)
        old = shared.bytes.view(unit)[(rows[:, None] * per + np.arange(per)).reshape(-1)]
        return new.reshape(-1, per), old.reshape(-1, per)

    return stored
