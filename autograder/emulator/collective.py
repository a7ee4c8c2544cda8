"""Warp-level instructions (shfl.sync, vote.sync, activemask, redux.sync, bar.warp.sync) and
calls to functions the module does not define (only ``vprintf``, which is how ``printf``
compiles; its output is captured, and ``__assertfail``, how a failed ``assert`` compiles:
``aborts.py``; the module's own device functions are inlined: ``inline.py``).

Warps are 32 consecutive linear thread ids of a block (the last one may be partial). Lanes
of one warp that are at the same PC run together, so a collective sees every lane of the
warp that reached it; an inactive or exited source lane of a shuffle yields its stale
register (the hardware leaves that undefined)."""

from __future__ import annotations

import re

import numpy as np

from autograder.backends.base import Unsupported
from autograder.emulator import aborts
from autograder.emulator.access import read_bytes
from autograder.emulator.isa import Reg, Sym, Vec, dtype_of

MAX_PRINTF_LINES = 2000


def _groups(ch, lanes: np.ndarray):
    """(start index of each warp's run in ``lanes``, warp-group id of each lane)."""
    warps = ch.warp_of[lanes]
    first = np.ones(lanes.size, bool)
    first[1:] = warps[1:] != warps[:-1]
    return np.flatnonzero(first), np.cumsum(first) - 1


def build_shfl(ins, ch):
    mode = next(m for m in ins.mods if m in ("up", "down", "bfly", "idx"))
    dt = dtype_of(ins.type)
    dst = ins.operands[0]
    d, p = (dst.items[0], dst.items[1]) if isinstance(dst, Vec) else (dst, None)
    source = ch.full(ins.operands[1], dt)
    if source is None:
        raise Unsupported("shfl source")
    get_b, get_c = (ch.src(o, np.uint32) for o in ins.operands[2:4])
    put_d = ch.dst(d, dt)
    put_p = ch.dst(p, np.bool_) if p is not None else None

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


def build_vote(ins, ch):
    mode = next(m for m in ins.mods if m in ("all", "any", "uni", "ballot"))
    pred = ch.src(ins.operands[1], np.bool_)
    put = ch.dst(ins.operands[0], np.uint32 if mode == "ballot" else np.bool_)

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        p = np.broadcast_to(pred(idx), lanes.shape)
        starts, group = _groups(ch, lanes)
        bits = p.astype(np.uint32) << (ch.lane_tid[lanes] % 32).astype(np.uint32)
        if mode == "ballot":  # inactive lanes contribute 0
            put(idx, np.bitwise_or.reduceat(bits, starts)[group])
            return
        yes = np.add.reduceat(p.astype(np.int64), starts)
        size = np.diff(np.append(starts, lanes.size))
        every, some = yes == size, yes > 0
        put(idx, (every if mode == "all" else some if mode == "any" else every | ~some)[group])

    return run


def build_activemask(ins, ch):
    put = ch.dst(ins.operands[0], np.uint32)

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


def build_redux(ins, ch):
    op = REDUX[next(m for m in ins.mods if m in REDUX)]
    dt = dtype_of(ins.type)
    get = ch.src(ins.operands[1], dt)
    put = ch.dst(ins.operands[0], dt)

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        starts, group = _groups(ch, lanes)
        values = np.broadcast_to(get(idx), lanes.shape).astype(dt)
        put(idx, op.reduceat(values, starts)[group])

    return run


def build_bar_warp(ins, ch):
    if "warp" not in ins.mods:
        raise Unsupported(f"{ins.op}.{'.'.join(ins.mods)}")

    def run(idx):  # __syncwarp(): earlier shared accesses of these warps stop racing
        lanes = ch.all_lanes if idx is None else idx
        keys = np.unique(ch.lane_slot[lanes] * 1024 + ch.lane_tid[lanes] // 32)
        ch.shared.shadow.sync_warps(keys)

    return run


def build_call(ins, ch):
    syms = [o.name for o in ins.operands if isinstance(o, Sym)]
    target = next((s for s in syms if "," not in s and s not in ch.m.kernel.call_params), None)
    params = [s.strip() for s in syms[-1].split(",")]
    if target == "__assertfail":
        return aborts.build_assertfail(ins, ch, params)
    if target != "vprintf":
        raise Unsupported(f"a call to {target}, which the kernel's file does not define, is not emulated")
    retval = syms[0] if syms[0] in ch.m.kernel.call_params else None
    fmt_reg, args_reg = (ch.reg(p) for p in params)
    put = ch.dst(Reg(retval), np.uint32) if retval else None

    def run(idx):
        lanes = ch.all_lanes if idx is None else idx
        out = ch.m.stdout
        lengths = np.zeros(lanes.size, np.uint32)
        for k, lane in enumerate(lanes.tolist()):
            if len(out) >= MAX_PRINTF_LINES:
                break
            text = printf(
                lambda addr, size, lane=lane: read_bytes(ch, lane, addr, size),
                int(fmt_reg[lane]),
                int(args_reg[lane]),
            )
            out.append(text)
            lengths[k] = len(text)
        if put is not None:
            put(idx, lengths)

    return run


_SPEC = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?(hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGaAcspn%])")


def printf(read, fmt_addr: int, args_addr: int) -> str:
    """Format one ``printf`` call from its format string and packed argument buffer."""
    raw = read(fmt_addr, 4096)
    fmt = raw.split(b"\0", 1)[0].decode(errors="replace")
    cursor = 0
    out = []
    last = 0
    for match in _SPEC.finditer(fmt):
        out.append(fmt[last : match.start()])
        last = match.end()
        flags, width, precision, length, conv = match.groups()
        if conv == "%":
            out.append("%")
            continue
        if width == "*" or precision == "*":
            out.append(match.group(0))
            continue
        size = 8 if conv in "eEfFgGaAsp" or length in ("l", "ll", "z", "j", "t") else 4
        cursor = (cursor + size - 1) // size * size
        data = read(args_addr + cursor, size).ljust(size, b"\0")
        cursor += size
        spec = f"%{flags}{width or ''}{'.' + precision if precision else ''}"
        out.append(_format_one(read, spec, conv, data, size))
    out.append(fmt[last:])
    return "".join(out)


def _format_one(read, spec: str, conv: str, data: bytes, size: int) -> str:
    if conv in "eEfFgGaA":
        value = np.frombuffer(data, np.float64)[0]
        return (spec + conv).replace("a", "e").replace("A", "E") % value
    if conv == "s":
        text = read(int.from_bytes(data, "little"), 4096).split(b"\0", 1)[0]
        return (spec + "s") % text.decode(errors="replace")
    if conv == "p":
        return hex(int.from_bytes(data, "little"))
    if conv == "c":
        return (spec + "c") % chr(data[0])
    signed = conv in "di"
    value = int.from_bytes(data, "little", signed=signed)
    return (spec + ("d" if conv in "diu" else conv)) % value
