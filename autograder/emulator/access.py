"""Memory instructions: ld, st, atom, red, cp.async on every state space, with bounds,
alignment, race and initialisation diagnostics and traffic counters.

An instruction's ``Access`` resolves where its lanes land: ``locate`` turns their addresses
into groups of (byte array, lane positions, byte offsets); lanes outside every allocation or
misaligned are reported and left out: their loads read garbage, their stores are dropped. What
it reports (``memory_findings.AccessFindings``), counts (``traffic.Traffic``) and checks in
shared memory (``shadow_check.ShadowCheck``) are each an object of their own that it holds.
``read_bytes`` reads memory as one lane sees it, for the strings of ``printf`` and ``assert``.

State spaces are what a GPU makes of them: an explicit space reaches only its own memory.
``ld.const`` reads ``__constant__`` variables only (a GPU reads its constant bank at the
address, so a pointer to a global buffer reads garbage there, not the buffer), nothing
writes a ``__constant__`` variable, ``ld.param``/``st.param`` through a pointer reach no
parameter, ``.shared``/``.local`` offsets outside their variables and ``.global``
addresses in no allocation are out of bounds: each is a finding, its read garbage, its
write dropped. Counts: ``counters.py``.

A request of every lane of a small chunk is worked out once per pattern of its addresses
relative to the first lane's (``patterns.Pattern``: extent, alignment, bank wavefronts,
sectors), and a shared one once per exact set of addresses (``Access.resolve``: where it lands,
its shadow words, the counts it adds), since a loop over a tile makes the same request trip
after trip; the shadow's checks and the data still run every time."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator.isa import DTYPES, Addr, Executor, Instr, Reg, Sym, Vec, dtype_of, immediate_bits
from autograder.emulator.memory import (
    GARBAGE,
    LOCAL_REGION,
    REGION_SHIFT,
    SHARED_REGION,
    SPACES,
    Region,
    by_window,
    window_of,
)
from autograder.emulator.memory_findings import AccessFindings
from autograder.emulator.patterns import (
    KEPT_LANES,
    PATTERN_LANES,
    Pattern,
    Resolved,
    inside_aligned,
    pattern,
    some_lanes_pattern,
)
from autograder.emulator.registers import Putter
from autograder.emulator.shadow import wide
from autograder.emulator.shadow_check import ShadowCheck
from autograder.emulator.traffic import Traffic

Groups = list[tuple[np.ndarray, np.ndarray | None, np.ndarray]]  # (bytes, positions (None: all), offsets)


def space_of(ins: Instr) -> str:
    for mod in ins.mods:
        base = mod.split("::")[0]
        if base in SPACES:
            return base
    return "generic"


def garbage(count: int, dtype: np.dtype) -> np.ndarray:
    return np.full(count * dtype.itemsize, GARBAGE, np.uint8).view(dtype)


RESOLVED_LIMIT = 16  # exact address sets an instruction remembers (resolve); then it starts over
MEMO_BYTES = 32 << 20  # what a chunk's instructions remember of them in all (past it, no more)


class Access:
    """How one memory instruction reaches its state space, for one chunk: where its lanes land
    (``locate``; a small chunk's shared requests resolved once per exact addresses: ``resolve``),
    and, each apart, what it reports (``findings``), counts (``traffic``) and checks in shared
    memory (``shadow``). ``chunk`` is a ``chunk.Chunk``: memory, counters and findings are those
    of the launch it runs when the instruction runs (``chunk.m``; a small chunk serves several)."""

    def __init__(self, ins: Instr, chunk, space: str):
        self.ins = ins
        self.ch = chunk
        self.const = space == "const"  # __constant__ variables are global allocations here
        self.space = "global" if self.const else space
        self.findings = AccessFindings(ins, chunk, self.const)
        self.traffic = Traffic(ins, chunk, self.space, counted=not self.const)  # the constant cache: none
        self.shadow = ShadowCheck(ins, chunk, self.findings)
        self._resolved: dict[bytes, Resolved] = {}  # shared requests of every lane (resolve)
        self._last: tuple[bytes, Resolved | None] = (b"", None)  # the last one resolved
        self.last_pattern: list = [b"", None]  # the pattern of its last request of every lane
        self.last_lanes: list = [None, b"", b"", None]  # its last request's lanes and pattern (some lanes)

    def resolve(self, a: np.ndarray, total: int, vec: int, write: bool, shift: int) -> Resolved | None:
        """Every lane of a chunk reaching one shared variable at ``a``, aligned: where
        in the chunk's shared bytes, the shadow words, and the request's counts, memoised by
        the exact addresses (a loop over a tile reaches the same ones each trip); None, with
        nothing reported, where some lane is outside or misaligned (``locate`` says which). A
        chunk of more than ``PATTERN_LANES`` lanes keeps only its last request's (none past
        ``KEPT_LANES``): a key of its size costs more to hash than to compare."""
        if a.size > KEPT_LANES:
            return None
        key = a.tobytes()
        # the addresses of its last run (a tile's, trip after trip) need no hash
        if key == self._last[0]:
            found = self._last[1]
        else:
            found = self._resolved.get(key) if a.size <= PATTERN_LANES else None
        if found is None:
            found = self._resolve(key, a, total, vec, write, shift)
            if found is None:
                return None
        self._last = key, found
        events = self.ch.m.tally.events[self.ins.index]
        for name, value in found.events:
            events[name] += value
        return found

    def _resolve(
        self, key: bytes, a: np.ndarray, total: int, vec: int, write: bool, shift: int
    ) -> Resolved | None:
        """``resolve`` of addresses not met before (``key``: their bytes), remembered (a small
        chunk's within the chunk's ``MEMO_BYTES``)."""
        seen = pattern(a, self.last_pattern)
        if seen is None or not self._one_variable(a, total, seen):
            return None
        ch = self.ch
        off = ch.shared_base + a
        words = off >> 2
        events: dict[str, int] = defaultdict(int)
        self.traffic.count(None, a, total, vec, write, words, aligned=True, seen=seen, into=events)
        span = seen.span(int(a[0]), total, ch.shared.unit_shift)
        rows = self.shadow.rows(off, total, words)
        found = Resolved(off, off >> shift, tuple(events.items()), seen, rows, span)
        if a.size > PATTERN_LANES:  # kept as the last one only (resolve)
            return found
        size = len(key) + off.nbytes + found.el.nbytes + found.rows.nbytes
        if ch.plan.memo_bytes + size > MEMO_BYTES:  # a kernel of very many shared accesses
            return None
        ch.plan.memo_bytes += size
        if len(self._resolved) >= RESOLVED_LIMIT:
            self._resolved.clear()
        self._resolved[key] = found
        return found

    # ----- locating ------------------------------------------------------------
    def locate(
        self,
        idx: np.ndarray | None,
        a: np.ndarray,
        total: int,
        write: bool,
        elem: int,
        seen: Pattern | None = None,
    ) -> Groups:
        """Where lanes ``idx`` (None: every lane) land at addresses ``a`` for ``total`` bytes each
        (``elem``: the element size findings count in): (bytes, positions in ``a`` (None: all),
        byte offsets) per memory reached; a lane out of bounds, misaligned or in a space the
        instruction does not reach is reported and left out. ``seen``: the pattern of ``a``
        (``patterns.pattern``; of lanes ``idx``: ``patterns.some_lanes_pattern``)."""
        return self._locate_in(self.space, idx, a, total, write, elem, seen)

    def _locate_in(
        self,
        space: str,
        idx: np.ndarray | None,
        a: np.ndarray,
        total: int,
        write: bool,
        elem: int,
        seen: Pattern | None = None,
    ) -> Groups:
        if space == "global":
            return self._global(idx, a, total, write, seen)
        if space == "shared":
            return self._shared(idx, a, total, write, elem, seen)
        if space == "local":
            return self._local(idx, a, total, write, elem)
        return self._generic(idx, a, total, write, elem)

    def _global(
        self, idx: np.ndarray | None, a: np.ndarray, total: int, write: bool, seen: Pattern | None = None
    ) -> Groups:
        memory = self.ch.m.memory
        first = int(a[0])
        region, base = memory.find(first)
        if region is not None and (not (self.const or write) or self._reaches(region, write)):
            if seen is not None:
                inside = seen.inside_aligned(first - base, 0, region.nbytes - total, total)
            else:
                inside = inside_aligned(a - base, region.nbytes - total, total)
            if inside:
                return [(region.bytes, None, a - base)]
        k, off = memory.owners(a)
        groups: Groups = []
        for kk in np.unique(k).tolist():
            region = memory.placed[kk] if kk >= 0 else None
            here = k == kk
            if region is None:
                self.findings.unknown(idx, a, np.flatnonzero(here), write)
                continue
            if not self._reaches(region, write):  # a GPU reads its constant bank there: garbage
                self.findings.wrong_space(idx, np.flatnonzero(here), off, region, write)
                continue
            inside = here & (off >= 0) & (off <= region.nbytes - total)
            outside = np.flatnonzero(here & ~inside)
            if outside.size:
                self.findings.out_of_bounds(
                    idx, outside, off[outside] // region.itemsize, region.count, region.name, write
                )
            aligned = inside & ((off & (total - 1)) == 0)
            misaligned = np.flatnonzero(inside & ~aligned)
            self.findings.misaligned(idx, off, misaligned, total, region.name, offsets=True)
            pos = np.flatnonzero(aligned)
            if pos.size:
                groups.append((region.bytes, pos, off[pos]))
        return groups

    def _reaches(self, region: Region, write: bool) -> bool:
        """Does this instruction's state space reach ``region``? ``ld.const`` reads only
        ``__constant__`` variables; nothing writes one (CUDA: they are read-only in kernels)."""
        if write:
            return not self.const and region.space != "const"
        return not self.const or region.space == "const"

    def _one_variable(self, a: np.ndarray, total: int, seen: Pattern | None = None) -> bool:
        """Is every address ``a`` inside the shared variable of the first, aligned to ``total``?"""
        first = int(a[0])
        var = self.ch.shared.layout.var_at(first)
        if var is None:
            return False
        last = var.start + var.size - total
        if seen is not None:
            return seen.inside_aligned(first, var.start, last, total)
        return inside_aligned(a, last, total, var.start)

    def _shared(
        self,
        idx: np.ndarray | None,
        a: np.ndarray,
        total: int,
        write: bool,
        elem: int,
        seen: Pattern | None = None,
    ) -> Groups:
        ch = self.ch
        layout = ch.shared.layout
        if self._one_variable(a, total, seen):
            base = ch.shared_base if idx is None else ch.shared_base[idx]
            return [(ch.shared.bytes, None, base + a)]
        slot = ch.lane_slot if idx is None else ch.lane_slot[idx]
        if not layout.vars:
            self.findings.out_of_bounds(idx, np.arange(a.size), a // elem, 0, "shared memory", write)
            return []
        which = np.maximum(np.searchsorted(layout.starts, a, side="right") - 1, 0)
        starts = layout.starts[which]
        sizes = np.array([v.size for v in layout.vars], np.int64)[which]
        rel = a - starts
        inside = (rel >= 0) & (rel <= sizes - total)
        for w in np.unique(which[~inside]).tolist():
            bad = np.flatnonzero(~inside & (which == w))
            v = layout.vars[w]
            self.findings.out_of_bounds(idx, bad, rel[bad] // elem, v.size // elem, v.name, write)
        aligned = inside & ((a & (total - 1)) == 0)
        self.findings.misaligned(idx, a, np.flatnonzero(inside & ~aligned), total, "shared memory")
        pos = np.flatnonzero(aligned)
        if pos.size == 0:
            return []
        return [(ch.shared.bytes, pos, slot[pos] * ch.shared.block_bytes + a[pos])]

    def _local(self, idx: np.ndarray | None, a: np.ndarray, total: int, write: bool, elem: int) -> Groups:
        ch = self.ch
        size = ch.m.local_size
        per_lane = ch.local.size // ch.n
        lanes = ch.all_lanes if idx is None else idx
        inside = (a >= 0) & (a <= size - total)
        bad = np.flatnonzero(~inside)
        if bad.size:
            self.findings.out_of_bounds(idx, bad, a[bad] // elem, size // elem, "a local array", write)
        aligned = inside & ((a & (total - 1)) == 0)
        self.findings.misaligned(idx, a, np.flatnonzero(inside & ~aligned), total, "a local array")
        if aligned.all():
            return [(ch.local, None, lanes * per_lane + a)]
        pos = np.flatnonzero(aligned)
        return [(ch.local, pos, lanes[pos] * per_lane + a[pos])]

    def _generic(self, idx: np.ndarray | None, a: np.ndarray, total: int, write: bool, elem: int) -> Groups:
        groups = []
        for sub, sub_idx, rel, space in by_window(idx, a):
            for buf, pos, off in self._locate_in(space, sub_idx, rel, total, write, elem):
                groups.append((buf, sub if pos is None else sub[pos], off))
        return groups


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
def build_ld(ins: Instr, ch) -> Executor:
    dt = dtype_of(ins.type)
    dsts = destinations(ins)
    puts = [ch.registers.dst(d, dt) for d in dsts]
    addr = ins.operands[1]
    space = space_of(ins)
    if space == "param":
        return _ld_param(ins, ch, dt, puts, addr)  # type: ignore[arg-type]
    direct = [ch.registers.view(d, dt) for d in dsts]
    block = ch.registers.consecutive(dsts, dt) if isinstance(ins.operands[0], Vec) else None
    return load_executor(Access(ins, ch, space), ch.address(addr), puts, direct, block)  # type: ignore[arg-type]


def destinations(ins: Instr) -> tuple:
    """The registers a load writes: its vector's, or its one."""
    dst = ins.operands[0]
    return dst.items if isinstance(dst, Vec) else (dst,)


def load_executor(
    access: Access, get_addr: Callable, puts: list[Putter], direct: list, block: np.ndarray | None
) -> Executor:
    """The executor of ``access``'s load (not ``ld.param``), its addresses ``get_addr(idx)``,
    into registers ``puts`` (``direct``: their plain views, or None; ``block``: a vector load's
    consecutive registers as one view, or None)."""
    ins, ch = access.ins, access.ch
    dt = dtype_of(ins.type)
    vec = len(puts)
    total = dt.itemsize * vec
    shift, check_shared = _shift_and_shadow(access, dt)
    load = _loader(puts, direct, block, dt)
    resolvable = access.space == "shared"  # an explicit .shared access (Access.resolve)
    count, check, check_resolved = access.traffic.count, access.shadow.check, access.shadow.check_resolved

    def run(idx: np.ndarray | None) -> None:
        a = get_addr(idx)
        if idx is None and resolvable and (known := access.resolve(a, total, vec, False, shift)):
            load(ch.shared.bytes, known.el, None)
            check_resolved(known, "read")
            return
        if idx is None:
            seen = pattern(a, access.last_pattern)
        else:
            seen = some_lanes_pattern(idx, a, access.last_lanes)
        groups = access.locate(idx, a, total, False, dt.itemsize, seen)
        if len(groups) == 1 and groups[0][1] is None:
            buf, _, off = groups[0]
            el = off >> shift
            shared = check_shared and buf is ch.shared.bytes
            words = (el if shift == 2 else off >> 2) if shared else None
            count(idx, a, total, vec, False, words, aligned=True, seen=seen)
            load(buf, el, idx)
            if shared:
                check(idx, None, off, total, "read", words, seen=seen, first=int(a[0]))
            return
        count(idx, a, total, vec, False)
        values = [garbage(a.size, dt) for _ in puts]
        for buf, pos, off in groups:
            view = buf.view(dt)
            el = off >> shift
            for k in range(vec):
                values[k][pos] = view[el + k]
            if check_shared and buf is ch.shared.bytes:
                check(idx, pos, off, total, "read")
        for put, v in zip(puts, values, strict=True):
            put(idx, v)

    return run


def _loader(puts: list[Putter], direct: list, block: np.ndarray | None, dt: np.dtype) -> Callable:
    """``load(buf, el, idx)``: lanes ``idx`` (None: every lane) take their values from ``buf`` at
    elements ``el`` (checked already) into registers ``puts`` (``direct``, ``block``:
    ``load_executor``'s)."""
    vec = len(puts)
    total = dt.itemsize * vec

    def load(buf: np.ndarray, el: np.ndarray, idx: np.ndarray | None) -> None:
        # indices are checked already: "wrap" skips numpy's buffered bounds check
        if vec > 1 and buf.size % total == 0:  # whole vectors in one gather (aligned: el % vec == 0)
            rows: np.ndarray = buf.view(wide(total)).take(el >> (vec.bit_length() - 1), mode="wrap").view(dt)
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

    return load


def _shift_and_shadow(access: Access, dt: np.dtype) -> tuple[int, bool]:
    """What a load or store needs beside its access: its element shift, and whether it checks
    the shadow (it may reach shared memory)."""
    return dt.itemsize.bit_length() - 1, access.space in ("shared", "generic")


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


def _refused_parameter_access(
    ins: Instr, ch, addr: Addr, write: bool, puts: Sequence[Putter], dt: np.dtype
) -> Executor:
    """``ld.param``/``st.param`` through a pointer (inline PTX): a finding for every lane,
    reads garbage, drops the write; a GPU reads and writes its parameter bank at that
    address, never the global or shared memory the pointer points to."""
    access = Access(ins, ch, "param")
    get_addr = ch.address(addr)

    def run(idx):
        a = get_addr(idx)
        access.findings.parameter_access(idx, a, write)  # a GPU: its parameter bank, not *a
        for put in puts:
            put(idx, garbage(a.size, dt))

    return run


def build_st(ins: Instr, ch) -> Executor:
    dt = dtype_of(ins.type)
    addr = ins.operands[0]
    gets = [ch.src(v, dt) for v in stored(ins)]
    space = space_of(ins)
    if space == "param":
        if not isinstance(addr.base, Sym):
            return _refused_parameter_access(ins, ch, addr, True, (), dt)
        name = addr.base.name
        if name not in ch.m.kernel.call_params or addr.offset or len(gets) > 1:
            raise Unsupported(f"st.param to {name} is not supported by the emulator")
        put = ch.registers.dst(Reg(name), dt)
        return lambda idx: put(idx, gets[0](idx))
    return store_executor(Access(ins, ch, space), ch.address(addr), gets)


def stored(ins: Instr) -> tuple:
    """The operands a store writes: its vector's, or its one."""
    value = ins.operands[1]
    return value.items if isinstance(value, Vec) else (value,)


def store_executor(access: Access, get_addr: Callable, gets: list[Callable]) -> Executor:
    """The executor of ``access``'s store (not ``st.param``), its addresses ``get_addr(idx)``,
    of the values ``gets`` (``get(idx)``)."""
    ins, ch = access.ins, access.ch
    dt = dtype_of(ins.type)
    vec = len(gets)
    total = dt.itemsize * vec
    shift, check_shared = _shift_and_shadow(access, dt)
    resolvable = access.space == "shared"  # an explicit .shared access (Access.resolve)
    count, check, check_resolved = access.traffic.count, access.shadow.check, access.shadow.check_resolved

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
                check_resolved(known, "write", stored)
            else:
                check(idx, pos, off, total, "write", values=stored, seen=seen)
        for k, v in enumerate(values):
            view[el + k if k else el] = v

    def run(idx):
        a = get_addr(idx)
        if idx is None and resolvable and (known := access.resolve(a, total, vec, True, shift)):
            store(ch.shared.bytes, None, known.off, known.el, None, known=known)
            return
        if idx is None:
            seen = pattern(a, access.last_pattern)
        else:
            seen = some_lanes_pattern(idx, a, access.last_lanes)
        groups = access.locate(idx, a, total, True, dt.itemsize, seen)
        whole = len(groups) == 1 and groups[0][1] is None
        count(idx, a, total, vec, True, aligned=whole, seen=seen if whole else None)
        checked = seen if whole and idx is None else None  # the shadow's Pattern.distinct: every lane's
        for buf, pos, off in groups:
            store(buf, pos, off, off >> shift, idx, seen=checked)

    return run


ATOM_OPS = ("add", "inc", "dec", "min", "max", "and", "or", "xor", "exch", "cas")


def build_atom(ins: Instr, ch) -> Executor:
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
        access.traffic.count_atomic(idx, a, size)
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
                access.shadow.check(idx, pos, off, size, "atomic")
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


def build_cp_async(ins: Instr, ch) -> Executor:
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
        load.traffic.count(idx, src, size, words, False)
        for buf, pos, off in load.locate(idx, src, size, False, dt.itemsize):
            for k in range(words):
                values[k][pos if pos is not None else slice(None)] = buf.view(dt)[(off >> shift) + k]
        if get_valid is not None:
            valid = np.asarray(get_valid(idx)).astype(np.int64)
            for k in range(words):
                values[k] = np.where(valid > k * dt.itemsize, values[k], 0).astype(dt)
        store.traffic.count(idx, dst, size, words, True)
        for buf, pos, off in store.locate(idx, dst, size, True, dt.itemsize):
            stored = values if pos is None else [v[pos] for v in values]
            store.shadow.check(idx, pos, off, size, "write", values=stored)  # before it lands
            for k in range(words):
                buf.view(dt)[(off >> shift) + k] = stored[k]

    return run
