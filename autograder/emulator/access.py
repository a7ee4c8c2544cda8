"""Memory instructions: ld, st, atom, red on every state space, with bounds, alignment,
race and initialisation diagnostics and traffic counters.

``locate`` turns the addresses of the lanes of one instruction into groups of
(byte array, lane positions, byte offsets); lanes outside every allocation or misaligned
are reported and left out: their loads read garbage, their stores are dropped.
``read_bytes`` reads memory as one lane sees it, for the strings of ``printf`` and ``assert``.

State spaces are what a GPU makes of them: an explicit space reaches only its own memory.
``ld.const`` reads ``__constant__`` variables only (a GPU reads its constant bank at the
address, so a pointer to a global buffer reads garbage there, not the buffer), nothing
writes a ``__constant__`` variable, ``ld.param``/``st.param`` through a pointer reach no
parameter, ``.shared``/``.local`` offsets outside their variables and ``.global``
addresses in no allocation are out of bounds: each is a finding, its read garbage, its
write dropped. Counts: ``counters.py``.

A request of every lane of a small chunk is worked out once per pattern of its addresses
relative to the first lane's (``Pattern``: extent, alignment, bank wavefronts, sectors), and a
shared one once per exact set of addresses (``Access.resolve``: where it lands, its shadow
words, the counts it adds), since a loop over a tile makes the same request trip after trip;
the shadow's checks and the data still run every time."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from autograder.contract import Finding, Unsupported
from autograder.emulator.counters import sectors, warp_count, whole_warps
from autograder.emulator.findings import dim3, fmt3
from autograder.emulator.isa import DTYPES, Addr, Instr, Reg, Sym, Vec, dtype_of, immediate_bits
from autograder.emulator.memory import (
    GARBAGE,
    LOCAL_REGION,
    NEAR_NULL,
    REGION_SHIFT,
    SHARED_REGION,
    Region,
    window_of,
)
from autograder.emulator.shadow import MANY, wide
from autograder.feedback import counted

SPACES = ("global", "shared", "local", "const", "param")


def space_of(ins: Instr) -> str:
    for mod in ins.mods:
        base = mod.split("::")[0]
        if base in SPACES:
            return base
    return "generic"


def garbage(count: int, dtype: np.dtype) -> np.ndarray:
    return np.full(count * dtype.itemsize, GARBAGE, np.uint8).view(dtype)


PATTERN_LANES = 2048  # requests of up to this many lanes are memoised by their pattern
PATTERN_LIMIT = 1 << 8  # memoised patterns (16 KiB each at most); then the memo starts over


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
        self.counts: dict[tuple, tuple[int, int] | int | bool] = {}

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


def pattern(a: np.ndarray, last: list | None = None) -> Pattern | None:
    """The memoised pattern of the addresses of every lane of a small chunk (None for a larger
    one); ``last``: the caller's ``[key, pattern]`` of its last request, kept up to date (a loop
    keeps its pattern: equal keys compare without a hash)."""
    if a.size > PATTERN_LANES:
        return None
    rel = a - a[0]
    key = rel.tobytes()
    if last is not None and key == last[0]:
        return last[1]
    found = _PATTERNS.get(key)
    if found is None:
        if len(_PATTERNS) >= PATTERN_LIMIT:
            _PATTERNS.clear()
        found = _PATTERNS[key] = Pattern(rel)
    if last is not None:
        last[:] = key, found
    return found


RESOLVED_LIMIT = 16  # exact address sets an instruction remembers (resolve); then it starts over
MEMO_BYTES = 32 << 20  # what a chunk's instructions remember of them in all (past it, no more)


class Resolved:
    """Where every lane of one shared request lands, all inside one variable and aligned: byte
    offsets in the chunk's shared memory (``off``), elements of the access's type (``el``), the
    counts it adds (``events``), its ``Pattern``, and its shadow rows (``Access.shadow_rows``)
    and span of units (``Pattern.span``)."""

    __slots__ = ("el", "events", "off", "per", "rows", "seen", "span")

    def __init__(self, off, el, events, seen, shadow: tuple, span):
        self.off, self.el, self.events, self.seen = off, el, events, seen
        (self.rows, self.per), self.span = shadow, span


class Access:
    """How one memory instruction reaches its space, for one chunk."""

    def __init__(self, ins: Instr, chunk, space: str):
        self.ins = ins
        self.ch = chunk
        self.const = space == "const"  # __constant__ variables are global allocations here
        self.space = "global" if self.const else space
        self.counted = not self.const  # the constant cache is no global-memory traffic
        self._resolved: dict[bytes, Resolved] = {}  # shared requests of every lane (resolve)
        self._last: tuple[bytes, Resolved | None] = (b"", None)  # the last one resolved
        self.last_pattern: list = [b"", None]  # the pattern of its last request of every lane

    @property
    def m(self):
        """The launch the chunk runs now (a small chunk serves several: ``Chunk.acquire``)."""
        return self.ch.m

    def resolve(self, a: np.ndarray, total: int, vec: int, write: bool, shift: int) -> Resolved | None:
        """Every lane of a small chunk reaching one shared variable at ``a``, aligned: where
        in the chunk's shared bytes, the shadow words, and the request's counts, memoised by
        the exact addresses (a loop over a tile reaches the same ones each trip); None, with
        nothing reported, where some lane is outside or misaligned (``locate`` says which)."""
        if a.size > PATTERN_LANES:
            return None
        key = a.tobytes()
        # the addresses of its last run (a tile's, trip after trip) need no hash
        found = self._last[1] if key == self._last[0] else self._resolved.get(key)
        if found is None:
            seen = pattern(a, self.last_pattern)
            if not self._one_variable(a, total, seen):
                return None
            off = self.ch.shared_base + a
            words = off >> 2
            events: dict[str, int] = defaultdict(int)
            self.count(None, a, total, vec, write, words, aligned=True, seen=seen, into=events)
            span = seen.span(int(a[0]), total, self.ch.shared.unit_shift)
            rows = self.shadow_rows(off, total, words)
            found = Resolved(off, off >> shift, tuple(events.items()), seen, rows, span)
            size = len(key) + off.nbytes + found.el.nbytes + found.rows.nbytes
            if self.ch.plan.memo_bytes + size > MEMO_BYTES:  # a kernel of very many shared accesses
                return None
            self.ch.plan.memo_bytes += size
            if len(self._resolved) >= RESOLVED_LIMIT:
                self._resolved.clear()
            self._resolved[key] = found
        self._last = key, found
        events = self.m.tally.events[self.ins.index]
        for name, value in found.events:
            events[name] += value
        return found

    # ----- locating ------------------------------------------------------------
    def locate(self, idx, a: np.ndarray, total: int, write: bool, elem: int, seen: Pattern | None = None):
        """``seen``: the pattern of ``a`` when every lane of the chunk accesses (``pattern``)."""
        if self.space == "global":
            return self._global(idx, a, total, write, seen)
        if self.space == "shared":
            return self._shared(idx, a, total, write, elem, seen)
        if self.space == "local":
            return self._local(idx, a, total, write, elem)
        return self._generic(idx, a, total, write, elem)

    def _global(self, idx, a, total, write, seen=None):
        memory = self.m.memory
        first = int(a[0])
        region, base = memory.find(first)
        if region is not None and (not (self.const or write) or self._reaches(region, write)):
            if seen is not None:
                inside = seen.inside_aligned(first - base, 0, region.nbytes - total, total)
            else:
                inside = _inside_aligned(a - base, region.nbytes - total, total)
            if inside:
                return [(region.bytes, None, a - base)]
        k, off = memory.owners(a)
        ok = np.zeros(a.size, bool)
        groups = []
        for kk in np.unique(k).tolist():
            region = memory.placed[kk] if kk >= 0 else None
            here = k == kk
            if region is None:
                self._report_unknown(idx, a, np.flatnonzero(here), write)
                continue
            if not self._reaches(region, write):  # a GPU reads its constant bank there: garbage
                self._report_space(idx, np.flatnonzero(here), off, region, write)
                continue
            inside = here & (off >= 0) & (off <= region.nbytes - total)
            outside = np.flatnonzero(here & ~inside)
            if outside.size:
                self._report_oob(
                    idx, outside, off[outside] // region.itemsize, region.count, region.name, write
                )
            aligned = inside & ((off & (total - 1)) == 0)
            misaligned = np.flatnonzero(inside & ~aligned)
            self._report_misaligned(idx, off, misaligned, total, region.name, offsets=True)
            pos = np.flatnonzero(aligned)
            ok[pos] = True
            if pos.size:
                groups.append((region.bytes, pos, off[pos]))
        return groups

    def _reaches(self, region: Region, write: bool) -> bool:
        """Does this instruction's state space reach ``region``? ``ld.const`` reads only
        ``__constant__`` variables; nothing writes one (CUDA: they are read-only in kernels)."""
        if write:
            return not self.const and region.space != "const"
        return not self.const or region.space == "const"

    def _one_variable(self, a, total: int, seen=None) -> bool:
        """Is every address ``a`` inside the shared variable of the first, aligned to ``total``?"""
        first = int(a[0])
        var = self.ch.shared.layout.var_at(first)
        if var is None:
            return False
        last = var.start + var.size - total
        if seen is not None:
            return seen.inside_aligned(first, var.start, last, total)
        return _inside_aligned(a, last, total, var.start)

    def _shared(self, idx, a, total, write, elem, seen=None):
        ch = self.ch
        layout = ch.shared.layout
        if self._one_variable(a, total, seen):
            base = ch.shared_base if idx is None else ch.shared_base[idx]
            return [(ch.shared.bytes, None, base + a)]
        slot = ch.lane_slot if idx is None else ch.lane_slot[idx]
        if not layout.vars:
            self._report_oob(idx, np.arange(a.size), a // elem, 0, "shared memory", write)
            return []
        which = np.maximum(np.searchsorted(layout.starts, a, side="right") - 1, 0)
        starts = layout.starts[which]
        sizes = np.array([v.size for v in layout.vars], np.int64)[which]
        rel = a - starts
        inside = (rel >= 0) & (rel <= sizes - total)
        for w in np.unique(which[~inside]).tolist():
            bad = np.flatnonzero(~inside & (which == w))
            v = layout.vars[w]
            self._report_oob(idx, bad, rel[bad] // elem, v.size // elem, v.name, write)
        aligned = inside & ((a & (total - 1)) == 0)
        self._report_misaligned(idx, a, np.flatnonzero(inside & ~aligned), total, "shared memory")
        pos = np.flatnonzero(aligned)
        if pos.size == 0:
            return []
        return [(ch.shared.bytes, pos, slot[pos] * ch.shared.block_bytes + a[pos])]

    def _local(self, idx, a, total, write, elem):
        ch = self.ch
        size = self.m.local_size
        per_lane = ch.local.size // ch.n
        lanes = ch.all_lanes if idx is None else idx
        inside = (a >= 0) & (a <= size - total)
        bad = np.flatnonzero(~inside)
        if bad.size:
            self._report_oob(idx, bad, a[bad] // elem, size // elem, "a local array", write)
        aligned = inside & ((a & (total - 1)) == 0)
        self._report_misaligned(idx, a, np.flatnonzero(inside & ~aligned), total, "a local array")
        if aligned.all():
            return [(ch.local, None, lanes * per_lane + a)]
        pos = np.flatnonzero(aligned)
        return [(ch.local, pos, lanes[pos] * per_lane + a[pos])]

    def _generic(self, idx, a, total, write, elem):
        groups = []
        for sub, sub_idx, rel, space in self._by_window(idx, a):
            self.space = space
            try:
                found = self.locate(sub_idx, rel, total, write, elem)
            finally:
                self.space = "generic"
            for buf, pos, off in found:
                groups.append((buf, sub if pos is None else sub[pos], off))
        return groups

    @staticmethod
    def _by_window(idx, a):
        """Split generic addresses into (positions, lanes, address in its space, space)."""
        k = window_of(a)
        for kk, space in ((SHARED_REGION, "shared"), (LOCAL_REGION, "local"), (None, "global")):
            here = (k != SHARED_REGION) & (k != LOCAL_REGION) if kk is None else k == kk
            sub = np.flatnonzero(here)
            if sub.size:
                base = 0 if kk is None else kk << REGION_SHIFT
                yield sub, (sub if idx is None else idx[sub]), a[sub] - base, space

    # ----- findings ----------------------------------------------------------------
    def _lane(self, idx, pos: int) -> int:
        return int(pos) if idx is None else int(idx[pos])

    def _report_oob(self, idx, bad, index, bound, array, write):
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        first = int(index[0])
        verb = "wrote" if write else "read"
        where = "past its end" if first >= bound else "before its start"
        message = (
            f"{self.m.log.where(ins.line)}: {ch.who(lane)} {verb} {array}[{first}] {where} "
            f"({array} has {counted(bound, 'element')})"
        )
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        name = None if array.startswith(("a local", "shared memory")) else array
        self.m.log.add(
            Finding(kind, message, ins.line, tid, block, name or array, first, bound), int(bad.size)
        )

    def _report_unknown(self, idx, a, bad, write):
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        verb = "wrote" if write else "read"
        address = int(a[bad[0]])
        if abs(address) < NEAR_NULL:
            what = f"address {address:#x}, which is inside no buffer (a null or uninitialised pointer?)"
        else:  # where a wild pointer points differs from launch to launch: not in the message
            what = (
                "an address inside no buffer (buffers lie at random addresses, new on every "
                "launch, at least 4 GiB apart)"
            )
        message = f"{self.m.log.where(ins.line)}: {ch.who(lane)} {verb} {what}"
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        self.m.log.add(Finding(kind, message, ins.line, tid, block), int(bad.size))

    def _report_space(self, idx, bad, off, region: Region, write: bool) -> None:
        """Lanes ``bad`` reached ``region`` through a state space that does not reach it."""
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        index = int(off[bad[0]]) // region.itemsize
        element = f"{region.name}[{index}]"
        if not self.const:
            why = f"wrote the __constant__ variable {element}, which kernels may only read"
        elif write:
            why = f"wrote {element} through the constant state space, which kernels cannot write"
        else:
            why = (
                f"read {element} through the constant state space (ld.const from a pointer to "
                f"{region.name}): a GPU reads its constant bank at that address, not {region.name}"
            )
        message = f"{self.m.log.where(ins.line)}: {ch.who(lane)} {why}"
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        finding = Finding(kind, message, ins.line, tid, block, region.name, index, region.count)
        self.m.log.add(finding, int(bad.size))

    def refuse_parameter_access(self, idx, a, write: bool) -> None:
        """``ld.param``/``st.param`` through a pointer: the parameter space holds the
        kernel's arguments at addresses no pointer value names, so every lane's access is
        out of bounds (a GPU reads its parameter bank there, whatever the pointer points to)."""
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, 0)
        verb = "wrote" if write else "read"
        message = (
            f"{self.m.log.where(ins.line)}: {ch.who(lane)} {verb} through the parameter state space "
            f"({ins.op}.param from a pointer): that space holds only the kernel's arguments, so a "
            "GPU does not reach the memory the pointer points to"
        )
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        self.m.log.add(Finding(kind, message, ins.line, tid, block, "the parameter space"), int(a.size))

    def _report_misaligned(self, idx, a, bad, total, array, offsets: bool = False):
        """``a``: the lanes' addresses in their space, or their byte offsets in ``array``
        (global buffers: where a buffer lies changes from launch to launch)."""
        if bad.size == 0:
            return
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        at = f"byte {int(a[bad[0]])} of {array}" if offsets else f"{int(a[bad[0]]):#x}"
        message = (
            f"{self.m.log.where(ins.line)}: {ch.who(lane)} accessed {array} at an address not "
            f"aligned to the {total}-byte access ({at})"
        )
        tid, block = ch.thread(lane)
        self.m.log.add(Finding("misaligned_access", message, ins.line, tid, block, array), int(bad.size))

    # ----- counters and shadow state --------------------------------------------
    def count(
        self,
        idx,
        a,
        total: int,
        vec: int,
        write: bool,
        words=None,
        aligned: bool = False,
        seen=None,
        into: dict | None = None,
    ) -> None:
        """Requests, bytes, sectors or wavefronts (and values: elements of the instruction's own
        type, which nothing graded reads) of one instruction; ``words`` are
        the lanes' shared words when the caller has them (any block offset: banks repeat);
        ``aligned``: the caller found every address aligned to ``total``; ``seen``: their
        ``Pattern`` when every lane of the chunk accesses (its counts are worked out once);
        ``into``: where to add them (default: the instruction's tally)."""
        if not self.counted:
            return
        if self.space == "generic":
            for _sub, sub_idx, rel, space in self._by_window(idx, a):
                self.space = space
                try:
                    self.count(sub_idx, rel, total, vec, write)
                finally:
                    self.space = "generic"
            return
        ch = self.ch
        events = self.m.tally.events[self.ins.index] if into is None else into
        lanes = a.size
        warps = ch.warp_of if idx is None else ch.warp_of[idx]
        requests = ch.n_warps if idx is None else warp_count(warps)
        requests_, values_, bytes_, sectors_, wavefronts_, conflicts_ = _EVENTS[self.space, write]
        full = ch.full_warps if idx is None else whole_warps(warps)
        if self.space == "shared":
            events[requests_] += requests
            events[values_] += lanes * vec  # elements of the instruction's type: never graded
            events[bytes_] += lanes * total
            words_per_lane = max(1, total // 4)
            words = a >> 2 if words is None else words
            # a warp's wavefronts depend on its words relative to its first: on the pattern, the
            # block size (which lanes form a warp) and the words per lane, once aligned to 4 bytes
            key = ("banks", words_per_lane, ch.bs) if seen is not None and aligned and total >= 4 else None
            counts = seen.counts.get(key) if key else None
            if counts is None:
                counts = self.m.banks.wavefronts(warps, words, full, words_per_lane)
                if key:
                    seen.counts[key] = counts
            wavefronts, minimum = counts
            events[wavefronts_] += wavefronts
            events[conflicts_] += wavefronts - minimum
        elif self.space == "global":
            events[requests_] += requests
            events[values_] += lanes * vec  # elements of the instruction's type: never graded
            events[bytes_] += lanes * total
            # sectors: the pattern, where the first address falls in its sector, the block size
            key = ("sectors", total, int(a[0]) & 31, ch.bs, aligned) if seen is not None else None
            count = seen.counts.get(key) if key else None
            if count is None:
                count = sectors(warps, a, total, full, aligned)
                if key:
                    seen.counts[key] = count
            events[sectors_] += count

    def count_atomic(self, idx, a, size: int) -> None:
        """An atomic (``atom`` or ``red``) reads and writes its address: a load request and
        a store request of ``size`` bytes a lane (see ``counters.py``)."""
        self.count(idx, a, size, 1, False)
        self.count(idx, a, size, 1, True)

    def shadow(
        self, idx, pos, off, total: int, how: str, words=None, values=None, seen=None, first: int = 0
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
        rows, per = self.shadow_rows(off, total, words)
        span = seen.span(first, total, ch.shared.unit_shift) if seen is not None and how == "read" else None
        distinct = seen is not None and how == "write" and seen.distinct(ch.bs)
        self._shadow(threads, rows, per, off, how, values, span, distinct)

    def shadow_resolved(self, known: Resolved, how: str, values=None) -> None:
        """``shadow`` for every lane of a resolved request (``resolve``)."""
        distinct = how == "write" and known.seen.distinct(self.ch.bs)
        self._shadow(self.ch.tid32, known.rows, known.per, known.off, how, values, known.span, distinct)

    def shadow_rows(self, off, total: int, words=None) -> tuple[np.ndarray, int]:
        """Each lane's row of ``per`` shadow units (the access is aligned to its size), and ``per``."""
        shift = self.ch.shared.unit_shift
        if words is None or shift != 2:
            words = off >> shift
        per = max(1, total >> shift)  # units per lane, a power of two
        return (words if per == 1 else words >> (per.bit_length() - 1)), per

    def _shadow(self, threads, rows, per: int, off, how: str, values, span, distinct: bool) -> None:
        shadow = self.ch.shared.shadow
        if how == "atomic":
            hazards = shadow.atomic_update(rows, threads, per, self.ins.index)
        elif how == "read":
            hazards = shadow.read(rows, threads, per, self.ins.index, span, _strong(self.ins))
        else:
            stored = None if values is None else _stored_words(self.ch.shared, values, off, rows, per)
            hazards = shadow.write(rows, threads, per, self.ins.index, stored, distinct, _strong(self.ins))
        for hazard in hazards:
            self._report_hazard(hazard)

    def _report_hazard(self, h) -> None:
        ins, ch, m = self.ins, self.ch, self.m
        unit = 1 << ch.shared.unit_shift
        slot, word = divmod(h.word, ch.shared.block_bytes // unit)
        var = ch.shared.layout.var_at(word * unit)
        name = var.name if var else "shared memory"
        index = (word * unit - var.start) // unit if var else word
        bound = var.size // unit if var else None
        as_units = "as 4-byte words" if unit == 4 else "as bytes"
        tid = dim3(h.thread, m.block)
        block = dim3(int(ch.block_linear[slot]), m.grid)
        who = f"thread {fmt3(tid)} of block {fmt3(block)}"
        where = m.log.where(ins.line)
        if h.other_pc is None:
            message = (
                f"{where}: {who} read {name}[{index}] ({as_units}) that no thread "
                "of its block wrote: shared memory starts as garbage"
            )
        else:
            other_line = m.program[h.other_pc].line
            other = "several other threads" if h.other == MANY else f"thread {fmt3(dim3(h.other, m.block))}"
            mine, theirs = h.what.split("-after-")
            message = (
                f"{where}: {who} {_VERBS[mine]} {name}[{index}] ({as_units}), which {other} "
                f"{_VERBS[theirs]} at {m.log.line(other_line)} with no barrier between ({h.what} race)"
            )
            if "atomic" in h.what:
                message += "; an atomic does not order a plain access to its word: put a barrier between them"
        m.log.add(Finding(h.kind, message, ins.line, tid, block, name, index, bound), h.count)


_VERBS = {"read": "read", "write": "wrote", "atomic": "atomically updated"}
_STRONG = frozenset(("volatile", "relaxed", "acquire", "release"))


def _strong(ins: Instr) -> bool:
    """A volatile, relaxed, acquire or release load or store: the memory model's strong
    access, which does not race with an atomic (a spin on a flag another thread sets with one)."""
    return not _STRONG.isdisjoint(ins.mods)


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


def _stored_words(shared, values, off: np.ndarray, rows: np.ndarray, per: int):
    """A lazy ``() -> (new, old)``: the shadow units a store writes and those it replaces,
    each (lanes, per), for the same-value test of a write-after-write."""
    unit = np.dtype(f"u{1 << shared.unit_shift}")

    def stored():
        lanes = [np.broadcast_to(np.asarray(v), off.shape) for v in values]
        new = np.ascontiguousarray(np.stack(lanes, axis=1)).view(np.uint8).view(unit)
        old = shared.bytes.view(unit)[(rows[:, None] * per + np.arange(per)).reshape(-1)]
        return new.reshape(-1, per), old.reshape(-1, per)

    return stored


def _inside_aligned(a: np.ndarray, last: int, total: int, first: int = 0) -> bool:
    """Every address in [first, last] and a multiple of ``total`` (cheap reductions only)."""
    return (
        last >= first
        and int(a.min()) >= first
        and int(a.max()) <= last
        and not int(np.bitwise_or.reduce(a)) & (total - 1)
    )


def narrow_shared_access(program: list[Instr]) -> bool:
    """Does any load or store reach shared memory with fewer than 4 bytes?"""
    return any(
        ins.op in ("ld", "ldu", "st", "atom", "red")
        and space_of(ins) in ("shared", "generic")
        and ins.types
        and np.dtype(DTYPES.get(ins.type, np.uint32)).itemsize < 4
        for ins in program
    )


# ----- what the emulator itself reads (printf's and assert's strings) ---------------------
def read_bytes(ch, lane: int, addr: int, size: int) -> bytes:
    """``size`` bytes at a generic address, as lane ``lane`` sees them (b"" if invalid)."""
    k = int(window_of(addr))
    off = addr - (k << REGION_SHIFT)
    if k == LOCAL_REGION:
        per = ch.local.size // ch.n
        buf, start, end = ch.local, lane * per + off, lane * per + min(per, off + size)
    elif k == SHARED_REGION:
        block = ch.shared.block_bytes
        slot = int(ch.lane_slot[lane])
        buf, start, end = ch.shared.bytes, slot * block + off, slot * block + min(block, off + size)
    else:
        region, base = ch.m.memory.find(addr)
        if region is None:
            return b""
        off = addr - base
        buf, start, end = region.bytes, off, min(region.nbytes, off + size)
    if off < 0 or start >= end:
        return b""
    return buf[start:end].tobytes()


# ----- instruction builders ---------------------------------------------------------
def build_ld(ins: Instr, ch):
    dt = dtype_of(ins.type)
    dst = ins.operands[0]
    puts = [ch.registers.dst(d, dt) for d in (dst.items if isinstance(dst, Vec) else (dst,))]
    addr = ins.operands[1]
    space = space_of(ins)
    if space == "param":
        return _ld_param(ins, ch, dt, puts, addr)
    vec = len(puts)
    total = dt.itemsize * vec
    access, get_addr, shift, check_shared = _plan(ins, ch, space, addr, dt)

    direct = [ch.registers.view(d, dt) for d in (dst.items if isinstance(dst, Vec) else (dst,))]
    block = ch.registers.consecutive(dst.items, dt) if isinstance(dst, Vec) else None
    resolvable = access.space == "shared"  # an explicit .shared access (Access.resolve)

    def load(buf, el, idx):
        """Every lane's values (lanes ``idx``) from ``buf`` at elements ``el``, into the registers."""
        # indices are checked already: "wrap" skips numpy's buffered bounds check
        if vec > 1 and buf.size % total == 0:  # whole vectors in one gather (aligned: el % vec == 0)
            rows = buf.view(wide(total)).take(el >> (vec.bit_length() - 1), mode="wrap").view(dt)
            rows = rows.reshape(-1, vec)
            if idx is None and block is not None:  # consecutive registers: one copy
                np.copyto(block, rows.T)
            else:
                for k, put in enumerate(puts):
                    put(idx, rows[:, k])
        else:
            view = buf.view(dt)
            for k, put in enumerate(puts):
                where = el + k if k else el
                if idx is None and direct[k] is not None:
                    view.take(where, out=direct[k], mode="wrap")
                else:
                    put(idx, view.take(where, mode="wrap"))

    def run(idx):
        a = get_addr(idx)
        if idx is None and resolvable and (known := access.resolve(a, total, vec, False, shift)):
            load(ch.shared.bytes, known.el, None)
            access.shadow_resolved(known, "read")
            return
        seen = pattern(a, access.last_pattern) if idx is None else None
        groups = access.locate(idx, a, total, False, dt.itemsize, seen)
        if len(groups) == 1 and groups[0][1] is None:
            buf, _, off = groups[0]
            el = off >> shift
            shared = check_shared and buf is ch.shared.bytes
            words = (el if shift == 2 else off >> 2) if shared else None
            access.count(idx, a, total, vec, False, words, aligned=True, seen=seen)
            load(buf, el, idx)
            if shared:
                access.shadow(idx, None, off, total, "read", words, seen=seen, first=int(a[0]))
            return
        access.count(idx, a, total, vec, False)
        values = [garbage(a.size, dt) for _ in puts]
        for buf, pos, off in groups:
            view = buf.view(dt)
            el = off >> shift
            for k in range(vec):
                values[k][pos] = view[el + k]
            if check_shared and buf is ch.shared.bytes:
                access.shadow(idx, pos, off, total, "read")
        for put, v in zip(puts, values, strict=True):
            put(idx, v)

    return run


def _plan(ins: Instr, ch, space: str, addr: Addr, dt: np.dtype):
    """What a load or store needs: its access, address getter, element shift, shadow flag."""
    access = Access(ins, ch, space)
    return access, ch.address(addr), dt.itemsize.bit_length() - 1, access.space in ("shared", "generic")


def names_a_parameter(ins: Instr) -> bool:
    """``ld.param`` of a parameter by name: a register move, no memory access (ops.py
    runs it as a pure instruction)."""
    addr = ins.operands[1] if len(ins.operands) > 1 else None
    return "param" in ins.mods and isinstance(addr, Addr) and isinstance(addr.base, Sym)


def _ld_param(ins, ch, dt, puts, addr: Addr):
    if not isinstance(addr.base, Sym):
        return _refused_parameter_access(ins, ch, addr, False, puts, dt)
    name = addr.base.name
    if name in ch.m.param_offset:  # where it lies is the kernel's; its value the launch's
        offsets = [ch.m.param_offset[name] + addr.offset + k * dt.itemsize for k in range(len(puts))]

        def run(idx):
            params = ch.m.params
            for put, at in zip(puts, offsets, strict=True):
                put(idx, params[at : at + dt.itemsize].view(dt)[0])

        return run
    if name in ch.m.kernel.call_params and addr.offset == 0 and len(puts) == 1:
        get = ch.src(Reg(name), dt)
        return lambda idx: puts[0](idx, get(idx))
    raise Unsupported(f"ld.param from {addr} is not supported by the emulator")


def _refused_parameter_access(ins, ch, addr: Addr, write: bool, puts, dt):
    """``ld.param``/``st.param`` through a pointer (inline PTX): a finding for every lane,
    reads garbage, drops the write; a GPU reads and writes its parameter bank at that
    address, never the global or shared memory the pointer points to."""
    access = Access(ins, ch, "param")
    get_addr = ch.address(addr)

    def run(idx):
        a = get_addr(idx)
        access.refuse_parameter_access(idx, a, write)  # a GPU: its parameter bank, not *a
        for put in puts:
            put(idx, garbage(a.size, dt))

    return run


def build_st(ins: Instr, ch):
    dt = dtype_of(ins.type)
    addr, value = ins.operands[0], ins.operands[1]
    gets = [ch.src(v, dt) for v in (value.items if isinstance(value, Vec) else (value,))]
    space = space_of(ins)
    if space == "param":
        if not isinstance(addr.base, Sym):
            return _refused_parameter_access(ins, ch, addr, True, (), dt)
        name = addr.base.name
        if name not in ch.m.kernel.call_params or addr.offset or len(gets) > 1:
            raise Unsupported(f"st.param to {name} is not supported by the emulator")
        put = ch.registers.dst(Reg(name), dt)
        return lambda idx: put(idx, gets[0](idx))
    vec = len(gets)
    total = dt.itemsize * vec
    access, get_addr, shift, check_shared = _plan(ins, ch, space, addr, dt)
    resolvable = access.space == "shared"  # an explicit .shared access (Access.resolve)

    def store(buf, pos, off, el, idx, seen=None, known=None):
        """Lanes ``idx[pos]`` (``pos`` None: all of ``idx``) store at bytes ``off`` of ``buf``
        (``known``: every lane, resolved)."""
        view = buf.view(dt)
        values = [get(idx) for get in gets]
        if pos is not None:
            values = [v[pos] if isinstance(v, np.ndarray) else v for v in values]
        if check_shared and buf is ch.shared.bytes:
            stored = [np.asarray(v, dt) for v in values]
            if known is not None:
                access.shadow_resolved(known, "write", stored)
            else:
                access.shadow(idx, pos, off, total, "write", values=stored, seen=seen)
        for k, v in enumerate(values):
            view[el + k if k else el] = v

    def run(idx):
        a = get_addr(idx)
        if idx is None and resolvable and (known := access.resolve(a, total, vec, True, shift)):
            store(ch.shared.bytes, None, known.off, known.el, None, known=known)
            return
        seen = pattern(a, access.last_pattern) if idx is None else None
        groups = access.locate(idx, a, total, True, dt.itemsize, seen)
        whole = len(groups) == 1 and groups[0][1] is None
        access.count(idx, a, total, vec, True, aligned=whole, seen=seen if whole else None)
        for buf, pos, off in groups:
            store(buf, pos, off, off >> shift, idx, seen=seen if whole else None)

    return run


ATOM_OPS = ("add", "inc", "dec", "min", "max", "and", "or", "xor", "exch", "cas")


def build_atom(ins: Instr, ch):
    dt = dtype_of(ins.type)
    op = next((m for m in ins.mods if m in ATOM_OPS), None)
    if op == "add" and ins.type in PACKED_ADD:  # atom.add.noftz.{f16,bf16}{,x2}: per half
        dt, op = np.dtype(np.uint16 if ins.type in ("f16", "bf16") else np.uint32), ins.type
    elif op is None or ("noftz" in ins.mods and dt.kind != "f"):
        raise Unsupported(f"{ins.op}.{'.'.join(ins.mods)}")
    has_dst = ins.op == "atom"
    operands = ins.operands[1:] if has_dst else ins.operands
    put = ch.registers.dst(ins.operands[0], dt) if has_dst else None
    addr = operands[0]
    gets = [ch.src(v, dt) for v in operands[1:]]
    access = Access(ins, ch, space_of(ins))
    get_addr = ch.address(addr)
    shift = dt.itemsize.bit_length() - 1
    size = dt.itemsize

    def run(idx):
        a = get_addr(idx)
        n = a.size
        args = [_lanes(g(idx), n, dt) for g in gets]
        groups = access.locate(idx, a, size, True, size)
        access.count_atomic(idx, a, size)
        old = garbage(n, dt)
        for buf, pos, off in groups:
            view = buf.view(dt)
            sub = [x if pos is None else x[pos] for x in args]
            result = atomic(view, off >> shift, op, *sub)
            if pos is None:
                old = result
            else:
                old[pos] = result
            if buf is ch.shared.bytes:
                access.shadow(idx, pos, off, size, "atomic")
        if put is not None:
            put(idx, old)

    return run


def _lanes(value, n, dt):
    if isinstance(value, np.ndarray) and value.ndim:
        return value
    return np.full(n, value, dt)


def atomic(view: np.ndarray, el: np.ndarray, op: str, b: np.ndarray, c=None) -> np.ndarray:
    """Apply one atomic per lane, in lane order, returning each lane's old value."""
    order = np.argsort(el, kind="stable")
    se = el[order]
    first = np.ones(se.size, bool)
    first[1:] = se[1:] != se[:-1]
    starts = np.flatnonzero(first)
    if starts.size == se.size:  # no collisions
        old = view[el]
        view[el] = _combine(op, old, b, c)
        return old
    group = np.cumsum(first) - 1
    rank = np.arange(se.size) - starts[group]
    rounds = int(rank.max()) + 1
    old = np.empty_like(b)
    if op == "add":
        return _atomic_add(view, el, b, order, se, starts, group)
    if rounds <= starts.size or op in ("cas", "inc", "dec", *PACKED_ADD):
        by_round = order[np.argsort(rank, kind="stable")]
        bounds = np.concatenate([[0], np.cumsum(np.bincount(rank))])
        for r in range(rounds):
            lanes = by_round[bounds[r] : bounds[r + 1]]
            prev = view[el[lanes]]
            old[lanes] = prev
            view[el[lanes]] = _combine(op, prev, b[lanes], None if c is None else c[lanes])
        return old
    ends = np.append(starts[1:], se.size)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=False):
        lanes = order[s:e]
        seq = np.concatenate([[view[se[s]]], b[lanes]]).astype(b.dtype)
        running = seq if op == "exch" else _ACCUMULATE[op].accumulate(seq)
        old[lanes] = running[:-1]
        view[se[s]] = running[-1]
    return old


_ACCUMULATE = {
    "min": np.minimum,
    "max": np.maximum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


PACKED_ADD = ("f16", "bf16", "f16x2", "bf16x2")


def packed_add(old, b, kind: str):
    """Halves (f16 or bf16, one or a pair per word) added each on its own and rounded to
    nearest even, subnormals kept (``.noftz``): an f16 sum is exact in f32, a bf16 sum in f64,
    and each rounds once more from there without a double-rounding error (24 >= 2 * 11 + 2,
    53 >= 2 * 8 + 2)."""
    halves = (0, 16) if kind.endswith("x2") else (0,)
    out = np.zeros(np.shape(old), np.uint32)
    for shift in halves:
        x, y = ((np.asarray(v).astype(np.uint32) >> np.uint32(shift)) & np.uint32(0xFFFF) for v in (old, b))
        if kind.startswith("f16"):
            left, right = (v.astype(np.uint16).view(np.float16) for v in (x, y))
            bits = (left.astype(np.float32) + right).astype(np.float16).view(np.uint16).astype(np.uint32)
        else:
            left, right = ((v << np.uint32(16)).view(np.float32) for v in (x, y))
            bits = _bf16_nearest((left.astype(np.float64) + right).astype(np.float32))
        out |= bits << np.uint32(shift)
    return out.astype(np.asarray(old).dtype)


def _bf16_nearest(f: np.ndarray) -> np.ndarray:
    """The bf16 bits of f32 values, rounded to nearest even; NaN the canonical 0x7FFF."""
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return np.where(np.isnan(f), np.uint64(0x7FFF), rounded).astype(np.uint32)


def _atomic_add(view, el, b, order, se, starts, group):
    wide = np.float64 if b.dtype.kind == "f" else b.dtype
    sb = b[order].astype(wide)
    inclusive = np.cumsum(sb, dtype=wide)
    exclusive = inclusive - sb
    base = exclusive[starts]
    ends = np.append(starts[1:], se.size) - 1
    init = view[se[starts]].astype(wide)
    old = np.empty_like(b)
    old[order] = (init[group] + (exclusive - base[group])).astype(b.dtype)
    view[se[starts]] = (init + (inclusive[ends] - base)).astype(b.dtype)
    return old


def _combine(op: str, old, b, c):
    if op == "add":
        return old + b
    if op in PACKED_ADD:
        return packed_add(old, b, op)
    if op == "min":
        return np.minimum(old, b)
    if op == "max":
        return np.maximum(old, b)
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    if op == "xor":
        return old ^ b
    if op == "exch":
        return b
    if op == "cas":
        return np.where(old == b, c, old)
    if op == "inc":
        return np.where(old >= b, 0, old + 1).astype(old.dtype)
    if op == "dec":
        return np.where((old == 0) | (old > b), b, old - 1).astype(old.dtype)
    raise Unsupported(f"atom.{op} is not supported by the emulator")


def build_cp_async(ins: Instr, ch):
    """``cp.async`` global -> shared, done at once (so ``commit_group``/``wait_group`` are
    no-ops); a source size below the copy size fills the rest with zeros."""
    if "async" not in ins.mods:
        raise Unsupported(f"cp.{'.'.join(ins.mods)}")
    if len(ins.operands) < 3:
        return lambda idx: None  # commit_group, wait_group, wait_all
    size = int(immediate_bits(ins.operands[2].text, ""))
    words = size // 4 if size >= 4 else 1
    dt = np.dtype(np.uint32 if size >= 4 else f"u{size}")
    get_dst, get_src = ch.address(ins.operands[0]), ch.address(ins.operands[1])
    get_valid = ch.src(ins.operands[3], np.uint32) if len(ins.operands) > 3 else None
    load, store = Access(ins, ch, "global"), Access(ins, ch, "shared")
    shift = dt.itemsize.bit_length() - 1

    def run(idx):
        src, dst = get_src(idx), get_dst(idx)
        values = [garbage(src.size, dt) for _ in range(words)]
        load.count(idx, src, size, words, False)
        for buf, pos, off in load.locate(idx, src, size, False, dt.itemsize):
            for k in range(words):
                values[k][pos if pos is not None else slice(None)] = buf.view(dt)[(off >> shift) + k]
        if get_valid is not None:
            valid = np.asarray(get_valid(idx)).astype(np.int64)
            for k in range(words):
                values[k] = np.where(valid > k * dt.itemsize, values[k], 0).astype(dt)
        store.count(idx, dst, size, words, True)
        for buf, pos, off in store.locate(idx, dst, size, True, dt.itemsize):
            stored = values if pos is None else [v[pos] for v in values]
            store.shadow(idx, pos, off, size, "write", values=stored)  # before it lands
            for k in range(words):
                buf.view(dt)[(off >> shift) + k] = stored[k]

    return run
