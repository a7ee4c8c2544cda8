"""Warp matrix instructions (``wmma.load``/``wmma.mma``/``wmma.store``, m16n16k16 with f16
inputs and f32 or f16 accumulators).

PTX leaves the distribution of fragment elements over a warp's lanes unspecified, so this
emulator picks its own, deliberately not the hardware's: element ``e`` (row-major index
``16 * row + col`` of the 16 x 16 tile) of an accumulator fragment sits in lane ``e % 32``,
register ``e // 32``; an f16 A/B fragment holds its 8 elements in the low halves of
registers 0-3 pairs, twice (registers 4-7 repeat 0-3, as the hardware's 16 halves per
lane do). Code that only loads, multiplies, stores and applies elementwise operations to
``frag.x[i]`` works unchanged; code that depends on where an element sits does not.

A wmma instruction is warp-collective: every lane of each warp must execute it together."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator.access import Access, space_of
from autograder.emulator.isa import Executor, Instr, Operand, Reg, Vec

TILE = 16
ELEMENTS = TILE * TILE
MMA_LANE_FLOPS = 2 * TILE * TILE * TILE // 32


def build_wmma(ins: Instr, ch):
    if "m16n16k16" not in ins.mods:
        raise Unsupported("only m16n16k16 wmma shapes")
    kind = ins.mods[0]
    if kind in ("load", "store"):
        return _build_transfer(ins, ch, write=kind == "store")
    if kind == "mma":
        return _build_mma(ins, ch)
    raise Unsupported(f"wmma.{kind}")


def warp_rows(ch, idx, instruction: str = "wmma") -> np.ndarray:
    """The executing lanes as (warps, 32); each warp must be complete (a warp-collective
    ``instruction``: wmma, and mma.sync, ldmatrix and stmatrix in ``mma.py``)."""
    lanes = ch.all_lanes if idx is None else idx
    partial = f"{instruction} executed by part of a warp (all 32 threads must execute it together)"
    if lanes.size % 32 or (ch.lane_tid[lanes[::32]] % 32).any():
        raise Unsupported(partial)
    rows = lanes.reshape(-1, 32)
    if (rows[:, 31] - rows[:, 0] != 31).any():
        raise Unsupported(partial)
    return rows


Fragment = np.ndarray | list[np.ndarray]  # a fragment's registers: rows of one table, or each apart


def _regs(ch, operand: Operand, halves: bool) -> Fragment:
    """A fragment's registers: one (registers, lanes) view where they are consecutive rows of
    one table (as declared, mostly: gathered and scattered at once), else each register."""
    if not isinstance(operand, Vec):
        raise Unsupported("wmma fragment operand")
    block = ch.registers.consecutive(operand.items, np.uint32 if halves else np.float32)
    return [ch.registers.reg(r.name) for r in operand.items] if block is None else block


def _halves(fragment_type: str) -> bool:
    return fragment_type in ("f16", "bf16")


def _gather_fragment(regs: Fragment, rows: np.ndarray, halves: bool) -> np.ndarray:
    """Registers of each warp -> (warps, 256) float32 matrix elements."""
    w = rows.shape[0]
    if isinstance(regs, np.ndarray):  # one gather of every register (half the time)
        return _elements(regs[: 4 if halves else len(regs), rows][None], halves)[0]
    by_slot = np.empty((w, 8, 32), np.float32)
    if halves:
        for r in range(4):
            bits = regs[r][rows].view(np.uint32) if regs[r].dtype != np.uint32 else regs[r][rows]
            by_slot[:, 2 * r] = (bits & 0xFFFF).astype(np.uint16).view(np.float16)
            by_slot[:, 2 * r + 1] = (bits >> 16).astype(np.uint16).view(np.float16)
    else:
        for j in range(8):
            by_slot[:, j] = regs[j][rows].view(np.float32)
    return by_slot.reshape(w, ELEMENTS)


def _scatter_fragment(regs: Fragment, rows: np.ndarray, values: np.ndarray, halves: bool) -> None:
    """(warps, 256) elements -> the registers of each warp's lanes."""
    if isinstance(regs, np.ndarray):  # every register at once
        regs[:, rows] = _registers(values[None], len(regs), halves)[0]
        return
    by_slot = values.reshape(-1, 8, 32)
    if halves:
        bits = by_slot.astype(np.float16).view(np.uint16).astype(np.uint32)
        for r in range(len(regs)):
            j = (2 * r) % 8
            regs[r].view(np.uint32)[rows] = bits[:, j] | (bits[:, j + 1] << 16)
    else:
        for j in range(8):
            regs[j].view(np.float32)[rows] = by_slot[:, j].astype(np.float32)


def _elements(regs: np.ndarray, halves: bool) -> np.ndarray:
    """Fragments' registers, (fragments, registers, warps, 32 lanes) -> their elements,
    (fragments, warps, 256) float32."""
    f, _, w, _ = regs.shape
    if not halves:
        return regs.transpose(0, 2, 1, 3).astype(np.float32).reshape(f, w, ELEMENTS)
    pairs = np.ascontiguousarray(regs[:, :4], "<u4").view("<f2").reshape(f, 4, w, 32, 2)  # low half 1st
    return pairs.transpose(0, 2, 1, 4, 3).astype(np.float32).reshape(f, w, ELEMENTS)


def _registers(values: np.ndarray, count: int, halves: bool) -> np.ndarray:
    """Fragments' elements, (fragments, warps, 256) -> their ``count`` registers each,
    (fragments, registers, warps, 32 lanes)."""
    by_slot = values.reshape(values.shape[0], -1, 8, 32)
    if halves:  # register r holds elements 2r and 2r + 1 (mod 8)
        bits: np.ndarray = by_slot.astype(np.float16).view(np.uint16).astype(np.uint32)
        by_slot = (bits[:, :, 0::2] | (bits[:, :, 1::2] << 16))[:, :, np.arange(count) % 4]
    return by_slot.transpose(0, 2, 1, 3)


def _addresses(ins, rows, get_addr, get_stride, idx, size):
    """Per element of each warp: its address and the lane that holds it."""
    base = get_addr(idx).reshape(-1, 32)[:, 0]
    stride = np.asarray(get_stride(idx)).astype(np.int64).reshape(-1)
    stride = np.broadcast_to(stride, (rows.size,)).reshape(-1, 32)[:, 0] if stride.size > 1 else stride
    e = np.arange(ELEMENTS)
    r, c = e // TILE, e % TILE
    if "col" in ins.mods:
        r, c = c, r
    offsets = r[None, :] * stride[:, None] + c[None, :]
    addresses = base[:, None] + offsets * size
    owners = rows[:, e % 32]
    return addresses.reshape(-1), owners.reshape(-1)


def _stride_getter(ins, ch, position: int):
    if len(ins.operands) > position:
        return ch.src(ins.operands[position], np.uint32)
    return lambda idx: np.uint32(TILE)


def _build_transfer(ins: Instr, ch, write: bool) -> Executor:
    """``wmma.load`` (``write`` False) or ``wmma.store``: one 16 x 16 tile per warp."""
    halves = _halves(ins.type)
    fragment, pointer = (ins.operands[1], ins.operands[0]) if write else ins.operands[:2]
    regs = _regs(ch, fragment, halves)
    access = Access(ins, ch, space_of(ins))
    get_addr = ch.address(pointer)
    get_stride = _stride_getter(ins, ch, 2)
    dtype = np.dtype(np.float16 if halves else np.float32)
    size = dtype.itemsize

    def run(idx):
        rows = warp_rows(ch, idx)
        addresses, owners = _addresses(ins, rows, get_addr, get_stride, idx, size)
        groups = access.locate(owners, addresses, size, write, size)
        access.traffic.count(owners, addresses, size, 1, write, per_warp=ELEMENTS)
        values = (
            _gather_fragment(regs, rows, halves).reshape(-1).astype(dtype)
            if write
            else np.zeros(addresses.size, dtype)
        )
        for buf, pos, off in groups:
            every = slice(None) if pos is None else pos
            if write:
                buf.view(dtype)[off // size] = values[every]
            else:
                values[every] = np.take(buf.view(dtype), off // size, mode="wrap")
            if buf is ch.shared.bytes:
                access.shadow.check(owners, pos, off, size, "write" if write else "read")
        if not write:
            _scatter_fragment(regs, rows, values.astype(np.float32).reshape(-1, ELEMENTS), halves)

    return run


def _build_mma(ins, ch):
    d_type, c_type = ins.types[-2], ins.types[-1]
    d, c = _regs(ch, ins.operands[0], _halves(d_type)), _regs(ch, ins.operands[3], _halves(c_type))
    a, b = (_regs(ch, o, True) for o in ins.operands[1:3])
    return mma_executor(ins, lambda: (ch, d, a, b, c))


def mma_registers(ins: Instr) -> tuple[list[str], list[str]] | None:
    """A ``wmma.mma``'s registers, as ``ops.fma_runs`` joins it to a run: those it writes (its
    ``d`` fragment's) and those it names; None for another instruction, or one that joins no run
    (guarded, not m16n16k16, a fragment not of plain registers)."""
    if ins.mods[:1] != ("mma",) or "m16n16k16" not in ins.mods or ins.guard is not None:
        return None
    fragments = ins.operands[:4]
    if not all(
        isinstance(o, Vec) and all(type(r) is Reg and not r.negate for r in o.items) for o in fragments
    ):
        return None
    names = [[r.name for r in o.items] for o in fragments]  # type: ignore[union-attr]
    return names[0], [name for fragment in names for name in fragment]


def build_mma_run(run: list[Instr], ch) -> Callable[[], None] | None:
    """Every lane of ``ch`` runs the independent ``wmma.mma``s of ``run`` (``ops.fma_runs``) as
    ``mma_executor`` runs each: each fragment's registers gathered as rows of its table at once
    (each distinct a and b fragment once), every product in one ``np.matmul`` (a 16 x 16 product
    each, as apart), the results written at once. None where the fragments of one operand do not
    lie in one table or their types differ from one instruction to another."""
    d_types, c_types = {ins.types[-2] for ins in run}, {ins.types[-1] for ins in run}
    if len(d_types) != 1 or len(c_types) != 1:
        return None
    d_halves, c_halves = _halves(d_types.pop()), _halves(c_types.pop())
    a_names = list(dict.fromkeys(_names(ins.operands[1]) for ins in run))
    b_names = list(dict.fromkeys(_names(ins.operands[2]) for ins in run))
    which_a = [a_names.index(_names(ins.operands[1])) for ins in run]
    which_b = [b_names.index(_names(ins.operands[2])) for ins in run]
    places = [
        _places(ch, a_names, True),
        _places(ch, b_names, True),
        _places(ch, [_names(ins.operands[3]) for ins in run], c_halves),
        _places(ch, [_names(ins.operands[0]) for ins in run], d_halves),
    ]
    if any(p is None for p in places):
        return None
    (a, a_rows), (b, b_rows), (c, c_rows), (d, d_rows) = places  # type: ignore[misc]
    shape = (len(run), ch.n // 32, TILE, TILE)

    def fused() -> None:
        warp_rows(ch, None)  # whole warps, or Unsupported as each instruction says
        left = _elements(_lanes(a, a_rows), True)[which_a].reshape(shape)
        right = _elements(_lanes(b, b_rows), True)[which_b].reshape(shape)
        acc = _elements(_lanes(c, c_rows), c_halves).reshape(shape)
        result = np.matmul(left, right) + acc
        values = _registers(result.reshape(len(run), -1, ELEMENTS), d_rows.shape[1], d_halves)
        d[d_rows] = values.reshape(*d_rows.shape, -1)

    return fused


def _names(operand: Operand) -> tuple[str, ...]:
    return tuple(r.name for r in operand.items)  # type: ignore[union-attr]


def _places(ch, fragments: list[tuple[str, ...]], halves: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Registers ``fragments`` as rows of one table, seen as their words (u32 for halves, else
    f32), and the (fragments, registers) rows; None where they lie in more than one table."""
    try:
        places = [[ch.registers.row(name) for name in names] for names in fragments]
    except KeyError:  # undeclared: the instruction's own executor says so
        return None
    table = places[0][0][0]
    if any(t is not table for f in places for t, _ in f) or table.dtype.itemsize != 4:
        return None
    return table.view(np.uint32 if halves else np.float32), np.array([[k for _, k in f] for f in places])


def _lanes(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` (fragments, registers) of a table, every lane: (fragments, registers, warps, 32)."""
    return table[rows].reshape(*rows.shape, -1, 32)


def mma_executor(ins: Instr, bound: Callable[[], tuple]) -> Executor:
    """``wmma.mma``'s executor: ``bound()`` gives the chunk it runs on and its fragments
    ``d, a, b, c`` (``_regs``), when it runs."""
    d_type, c_type = ins.types[-2], ins.types[-1]

    def run(idx):
        ch, d, a, b, c = bound()
        rows = warp_rows(ch, idx)
        left = _gather_fragment(a, rows, True).reshape(-1, TILE, TILE)
        right = _gather_fragment(b, rows, True).reshape(-1, TILE, TILE)
        acc = _gather_fragment(c, rows, _halves(c_type)).reshape(-1, TILE, TILE)
        # products of halves are exact in f32; the sum is accumulated in f32 as on tensor cores
        result = np.matmul(left, right) + acc
        _scatter_fragment(d, rows, result.reshape(-1, ELEMENTS), _halves(d_type))

    return run
