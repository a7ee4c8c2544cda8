"""Warp-level instructions (shfl.sync, vote.sync, match.sync, activemask, redux.sync,
bar.warp.sync) and calls to functions the module does not define (only ``vprintf``, which
is how ``printf`` compiles; its output is captured, and ``__assertfail``, how a failed
``assert`` compiles: ``aborts.py``; the module's own device functions are inlined:
``inline.py``).

Warps are 32 consecutive linear thread ids of a block (the last one may be partial). Lanes
of one warp that are at the same PC run together, so a collective sees every lane of the
warp that reached it; an inactive or exited source lane of a shuffle yields its stale
register (the hardware leaves that undefined).

``match.sync`` honours its member mask: a lane compares its value with the lanes of its
mask that run the instruction with it. A lane of the mask that has exited takes no part,
as on an H200 (measured: with lanes 16-31 exited, ``__match_all_sync(0xffffffff, v)`` of
equal values gives 0x0000ffff and true). Limit: a live lane of the mask at another PC
takes no part either, where an H200 waits for it and matches it at its own ``match.sync``
(measured: the two halves of a warp at two different ``match.any.sync`` instructions, full
mask, are matched as one warp); the emulator matches only the lanes of one instruction, as
it shuffles and votes."""

from __future__ import annotations

import re

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator import aborts
from autograder.emulator.access import read_bytes
from autograder.emulator.isa import Executor, Instr, Reg, Sym, Vec, dtype_of

MAX_PRINTF_LINES = 2000
MAX_PRINTF_CHARS = 64 << 10  # printf output kept per launch, as the GPU backend keeps


def _groups(ch, lanes: np.ndarray):
    """(start index of each warp's run in ``lanes``, warp-group id of each lane)."""
    warps = ch.warp_of[lanes]
    first = np.ones(lanes.size, bool)
    first[1:] = warps[1:] != warps[:-1]
    return np.flatnonzero(first), np.cumsum(first) - 1


def build_shfl(ins: Instr, ch) -> Executor:
    mode = next(m for m in ins.mods if m in ("up", "down", "bfly", "idx"))
    dt = dtype_of(ins.type)
    dst = ins.operands[0]
    d, p = (dst.items[0], dst.items[1]) if isinstance(dst, Vec) else (dst, None)
    source = ch.full(ins.operands[1], dt)
    if source is None:
        raise Unsupported("shfl source")
    get_b, get_c = (ch.src(o, np.uint32) for o in ins.operands[2:4])
    put_d = ch.registers.dst(d, dt)
    put_p = ch.registers.dst(p, np.bool_) if p is not None else None

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        tid = ch.lane_tid[lanes]
        lane = tid % 32
        b = np.asarray(get_b(idx)).astype(np.int64) & 31
        c = np.asarray(get_c(idx)).astype(np.int64)
        segmask = (c >> 8) & 31
        max_lane = (lane & segmask) | (c & 31 & ~segmask)
        if mode == "up":
            j = lane - b
            ok = j >= max_lane
        elif mode == "down":
            j = lane + b
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            ok = j <= max_lane
        else:
            j = (lane & segmask) | (b & ~segmask)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        inside = tid - lane + j < ch.bs  # a partial last warp has no lane j
        src = np.where(inside, lanes - lane + j, lanes)
        values = source[src] if isinstance(source, np.ndarray) else source
        put_d(idx, values)
        if put_p is not None:
            put_p(idx, ok & inside)

    return run


def _member_groups(ch, lanes: np.ndarray, member) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The lanes of one warp that name one member mask take part together, as when
    ``cg::labeled_partition`` splits a warp and each part reduces alone: (the order that makes
    each group's lanes consecutive, or None when they already are, the start of each group in
    that order, each lane's group)."""
    starts, group = _groups(ch, lanes)
    if member is None:
        return None, starts, group
    mask = np.broadcast_to(member, lanes.shape)
    if lanes.size == 0 or (mask == mask[0]).all():
        return None, starts, group
    key = (group.astype(np.int64) << 32) | mask.astype(np.int64)
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    new = np.ones(lanes.size, bool)
    new[1:] = ordered[1:] != ordered[:-1]
    by_member = np.empty(lanes.size, np.int64)
    by_member[order] = np.cumsum(new) - 1
    return order, np.flatnonzero(new), by_member


def _reduce_members(ufunc, values: np.ndarray, grouping) -> np.ndarray:
    """``ufunc`` over each group of ``_member_groups``, given to each of its lanes."""
    order, starts, group = grouping
    ordered = values if order is None else values[order]
    return ufunc.reduceat(ordered, starts)[group]


def _member_operand(ins, ch):
    """The member mask of a ``.sync`` collective (its last operand), or None for the old
    forms without one."""
    return ch.src(ins.operands[-1], np.uint32) if "sync" in ins.mods else None


def build_vote(ins: Instr, ch) -> Executor:
    mode = next(m for m in ins.mods if m in ("all", "any", "uni", "ballot"))
    pred = ch.src(ins.operands[1], np.bool_)
    member = _member_operand(ins, ch)
    put = ch.registers.dst(ins.operands[0], np.uint32 if mode == "ballot" else np.bool_)

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        p = np.broadcast_to(pred(idx), lanes.shape)
        grouping = _member_groups(ch, lanes, None if member is None else member(idx))
        if mode == "ballot":  # inactive lanes contribute 0
            bits = p.astype(np.uint32) << (ch.lane_tid[lanes] % 32).astype(np.uint32)
            put(idx, _reduce_members(np.bitwise_or, bits, grouping))
            return
        yes = _reduce_members(np.add, p.astype(np.int64), grouping)
        size = _reduce_members(np.add, np.ones(lanes.size, np.int64), grouping)
        every, some = yes == size, yes > 0
        put(idx, every if mode == "all" else some if mode == "any" else every | ~some)

    return run


def build_match(ins: Instr, ch) -> Executor:
    """``match.any.sync.{b32,b64} d, a, mask``: the lanes of ``mask`` whose ``a`` equals
    this lane's; ``match.all.sync.{b32,b64} d|p, a, mask``: the lanes of ``mask`` that run
    it, and true, if they all hold the same ``a``, else 0 and false."""
    mode = next(m for m in ins.mods if m in ("any", "all"))
    dst = ins.operands[0]
    d, p = (dst.items[0], dst.items[1]) if isinstance(dst, Vec) else (dst, None)
    value = ch.src(ins.operands[1], dtype_of(ins.type))
    member = ch.src(ins.operands[2], np.uint32)
    put_d = ch.registers.dst(d, np.uint32)
    put_p = ch.registers.dst(p, np.bool_) if p is not None else None

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        mask = np.broadcast_to(member(idx), lanes.shape)
        same, present = _equal_lanes(ch, lanes, np.broadcast_to(value(idx), lanes.shape))
        if mode == "any":
            put_d(idx, same & mask)
            return
        every = (same & mask) == (present & mask)
        put_d(idx, np.where(every, present & mask, np.uint32(0)))
        if put_p is not None:
            put_p(idx, every)

    return run


def _equal_lanes(ch, lanes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per lane: the bits of the lanes of its warp (among ``lanes``) holding its value, and
    the bits of every lane of its warp (among ``lanes``)."""
    bits = np.uint32(1) << (ch.lane_tid[lanes] % 32).astype(np.uint32)
    starts, group = _groups(ch, lanes)
    present = np.bitwise_or.reduceat(bits, starts)[group]
    order = np.lexsort((values, group))  # by warp, then by value: runs of equal values
    warps, sorted_values = group[order], values[order]
    new = np.ones(lanes.size, bool)
    new[1:] = (warps[1:] != warps[:-1]) | (sorted_values[1:] != sorted_values[:-1])
    runs = np.flatnonzero(new)
    same = np.empty(lanes.size, np.uint32)
    same[order] = np.bitwise_or.reduceat(bits[order], runs)[np.cumsum(new) - 1]
    return same, present


def build_activemask(ins: Instr, ch) -> Executor:
    put = ch.registers.dst(ins.operands[0], np.uint32)

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        starts, group = _groups(ch, lanes)
        bits = np.uint32(1) << (ch.lane_tid[lanes] % 32).astype(np.uint32)
        put(idx, np.bitwise_or.reduceat(bits, starts)[group])

    return run


REDUX = {
    "add": np.add,
    "min": np.minimum,
    "max": np.maximum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


def build_redux(ins: Instr, ch) -> Executor:
    op = REDUX[next(m for m in ins.mods if m in REDUX)]
    dt = dtype_of(ins.type)
    get = ch.src(ins.operands[1], dt)
    member = _member_operand(ins, ch)
    put = ch.registers.dst(ins.operands[0], dt)

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        values = np.broadcast_to(get(idx), lanes.shape).astype(dt)
        put(idx, _reduce_members(op, values, _member_groups(ch, lanes, member(idx))))

    return run


def build_bar_warp(ins, ch):
    if "warp" not in ins.mods:
        raise Unsupported(f"{ins.op}.{'.'.join(ins.mods)}")

    def run(idx):  # __syncwarp(): earlier shared accesses of these warps stop racing
        lanes = ch.all_lanes if idx is None else idx
        keys = np.unique(ch.lane_slot[lanes] * 1024 + ch.lane_tid[lanes] // 32)
        ch.shared.shadow.sync_warps(keys)

    return run


def build_call(ins: Instr, ch) -> Executor:
    syms = [o.name for o in ins.operands if isinstance(o, Sym)]
    target = next((s for s in syms if "," not in s and s not in ch.m.kernel.call_params), None)
    params = [s.strip() for s in syms[-1].split(",")]
    if target == "__assertfail":
        return aborts.build_assertfail(ins, ch, params)
    if target != "vprintf":
        raise Unsupported(f"a call to {target}, which the kernel's file does not define, is not emulated")
    retval = syms[0] if syms[0] in ch.m.kernel.call_params else None
    fmt_reg, args_reg = (ch.registers.reg(p) for p in params)
    put = ch.registers.dst(Reg(retval), np.uint32) if retval else None

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        out = ch.m.stdout
        lengths = np.zeros(lanes.size, np.uint32)
        kept = sum(map(len, out))
        for k, lane in enumerate(lanes.tolist()):
            if len(out) >= MAX_PRINTF_LINES or kept >= MAX_PRINTF_CHARS:
                break
            text = printf(
                lambda addr, size, lane=lane: read_bytes(ch, lane, addr, size),
                int(fmt_reg[lane]),
                int(args_reg[lane]),
            )
            out.append(text[: MAX_PRINTF_CHARS - kept])
            kept += len(out[-1])
            lengths[k] = len(text)
        if put is not None:
            put(idx, lengths)

    return run


_SPEC = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d*|\*))?(hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGaAcspn%])")
MAX_FIELD = 4096  # width or precision of one conversion, at most (the emulator's bound)
MAX_ARGS = 32  # CUDA's printf takes 32 arguments; specifiers past them are printed as is
INT_BITS = {"hh": 8, "h": 16, None: 32, "l": 64, "ll": 64}


def printf(read, fmt_addr: int, args_addr: int) -> str:
    """Format one ``printf`` call from its format string and packed argument buffer, as an
    H200's printf does (measured): a conversion it does not support (``%n``, ``%zu``,
    ``%Lf``, ``%.*f``, ``%5%``) is printed as written (here it takes no argument either);
    ``%n`` writes nothing; ``%s`` of a null pointer prints ``(null)``, ``%p`` of one
    ``(nil)``, ``%a`` a hexadecimal float; ``%hd``/``%hhd`` print the argument's low 16 or 8
    bits. A width or precision is at most ``MAX_FIELD``."""
    raw = read(fmt_addr, 4096)
    fmt = raw.split(b"\0", 1)[0].decode(errors="replace")
    args = _Arguments(read, args_addr)
    out = []
    last = 0
    for match in _SPEC.finditer(fmt):
        out.append(fmt[last : match.start()])
        last = match.end()
        out.append(_conversion(read, match, args))
    out.append(fmt[last:])
    return "".join(out)


class _Arguments:
    """The packed argument buffer: each argument aligned to its size."""

    def __init__(self, read, addr: int):
        self.read, self.addr, self.cursor, self.taken = read, addr, 0, 0

    def take(self, size: int) -> bytes:
        self.cursor = (self.cursor + size - 1) // size * size
        data = self.read(self.addr + self.cursor, size).ljust(size, b"\0")
        self.cursor += size
        self.taken += 1
        return data


def _conversion(read, match, args: _Arguments) -> str:
    flags, width, precision, length, conv = match.groups()
    if match.group(0) == "%%":
        return "%"
    if conv in "n%" or length in ("z", "j", "t", "L") or precision == "*" or args.taken >= MAX_ARGS:
        return match.group(0)  # as an H200 prints it (measured): not supported
    if width == "*":
        width = str(int.from_bytes(args.take(4), "little", signed=True))
        if width.startswith("-"):
            flags, width = flags + "-", width[1:]
    width = str(min(int(width), MAX_FIELD)) if width else ""
    precision = None if precision is None else str(min(int(precision or 0), MAX_FIELD))
    spec = f"%{flags}{width}{'.' + precision if precision is not None else ''}"
    size = 8 if conv in "eEfFgGaAsp" or (length in ("l", "ll") and conv != "c") else 4
    return _format_one(read, spec, conv, length, args.take(size))


def _format_one(read, spec: str, conv: str, length: str | None, data: bytes) -> str:
    if conv in "eEfFgG":
        return (spec + conv) % np.frombuffer(data, np.float64)[0]
    if conv in "aA":
        return (spec + "s") % _hex_float(float(np.frombuffer(data, np.float64)[0]), conv == "A")
    address = int.from_bytes(data, "little")
    if conv == "s":
        text = read(address, 4096).split(b"\0", 1)[0].decode(errors="replace") if address else "(null)"
        return (spec + "s") % text
    if conv == "p":
        return (spec.split(".")[0] + "s") % (hex(address) if address else "(nil)")
    if conv == "c":
        return (spec.split(".")[0] + "c") % chr(data[0])
    bits = INT_BITS[length]
    value = address & ((1 << bits) - 1)
    if conv in "di" and value >> (bits - 1):
        value -= 1 << bits
    if conv == "o" and "#" in spec:  # C's alternate octal is 010, Python's 0o10
        digits = f"{value:o}"
        return (spec.replace("#", "") + "s") % ("0" + digits if value else digits)
    return (spec + ("d" if conv in "diu" else conv)) % value


def _hex_float(value: float, upper: bool) -> str:
    """C's ``%a``: ``0x1.8p+0`` for 1.5 (Python's ``float.hex`` pads the fraction)."""
    text = value.hex()
    if "p" in text:
        mantissa, exponent = text.split("p")
        mantissa = mantissa.rstrip("0").rstrip(".")
        text = f"{mantissa}p{exponent}"
    return text.upper() if upper else text
