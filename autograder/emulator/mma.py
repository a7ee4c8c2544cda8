"""Warp matrix instructions whose fragments the PTX ISA specifies: ``mma.sync.aligned``
(m16n8kK, ``.row.col``) and ``ldmatrix`` / ``stmatrix`` (``.m8n8`` ``.b16``).

``mma.sync`` computes D = A B + C per warp, A 16 x K, B K x 8, C and D 16 x 8: with .f16 or
.bf16 inputs K = 8 or 16, with .tf32 K = 4 or 8, with .s8/.u8 K = 16 or 32; accumulators
.f32 (also .f16 for .f16 inputs; .s32 for integers, clamped by ``.satfinite``, else
wrapping). Other shapes (m8n8k4, m16n8k64 .s4, ...) and inputs (.e4m3, .f64, .b1) raise
``NotEmulated`` naming them.

Fragments, as the ISA's "Matrix Fragments for mma.m16n8k*" give them: lane ``l`` is
thread ``t = l % 4`` of group ``g = l // 4``; a 32-bit register holds ``e = 4 / bytes``
elements, element ``p`` in its p-th lowest 8 or 16 bits. Register ``r`` of A holds row
``g + 8 (r % 2)``, columns ``e t + p + 4 e (r // 2)``; register ``r`` of B holds rows (k)
``e t + p + 4 e r`` of column ``g``; element ``i`` of C and D (one a register for .f32 and
.s32, two for .f16) is row ``g + 8 (i // 2)``, column ``2 t + i % 2``.

Arithmetic: products of .f16, .bf16 and .tf32 values are exact; the K products and C are
summed in f64 and rounded once to nearest (even) in the accumulator's type. The ISA says
neither the order nor the precision of a tensor core's additions: the result is exact (a
GPU's too) whenever the sum fits the accumulator, as with integer-valued inputs and small
sums; otherwise it may differ from an H200's in the last bits of f32 (published
measurements of earlier tensor cores show aligned, truncated partial sums). A .tf32
operand is the top 19 bits of its register: the low 13 are ignored, as a GPU ignores them.
Integer results are exact.

``ldmatrix`` / ``stmatrix``: lane ``8 j + r`` of each warp gives the address of row ``r``
of matrix ``j``, 8 b16 elements (16 bytes, 16-byte aligned); the lanes past ``8 x num``
give none (ignored: the ISA asks an address of every lane only up to sm_75). Lane ``l``'s
register ``j`` holds row ``l // 4``, elements ``2 (l % 4)`` and ``+ 1`` of matrix ``j``
(the first in the low half); with ``.trans`` column ``l // 4``, rows ``2 (l % 4)`` and
``+ 1``. Each row is read (written) by the lane that gives its address, through the path
of a 16-byte ``ld.shared.v4`` (``st.shared.v4``): bounds and alignment, the
initialisation and race shadow, requests, values and bank wavefronts (``access.py``,
``counters.py``). So a race is found against that lane, not against the lanes that
receive the row's values; and, as for ``ld.shared.v4``, the bank model takes the warp's
rows together where a GPU takes each 8-row matrix in its own phase, so conflicts within
one matrix (rows 32 bytes apart) are not counted.

All three are warp-collective: every lane of each warp executes them together."""

from __future__ import annotations

import re

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator.access import Access, garbage, space_of
from autograder.emulator.isa import Executor, Instr, NotEmulated, Operand, Reg, Vec
from autograder.emulator.wmma import warp_rows

M, N = 16, 8
ROW_BYTES = 16  # one row of an ldmatrix matrix: 8 b16 elements
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
# input type -> the K of m16n8kK the ISA defines for it, and the accumulators it allows
INPUTS = {
    "f16": ((8, 16), ("f32", "f16")),
    "bf16": ((8, 16), ("f32",)),
    "tf32": ((4, 8), ("f32",)),
    "s8": ((16, 32), ("s32",)),
    "u8": ((16, 32), ("s32",)),
}
BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "s8": 1, "u8": 1, "f32": 4, "s32": 4}
# element bits (uint32, in the low bits) -> values
DECODE = {
    "f16": lambda bits: bits.astype(np.uint16).view(np.float16),
    "bf16": lambda bits: (bits << np.uint32(16)).view(np.float32),
    "tf32": lambda bits: (bits & np.uint32(0xFFFFE000)).view(np.float32),  # low 13 bits ignored
    "s8": lambda bits: bits.astype(np.uint8).view(np.int8),
    "u8": lambda bits: bits.astype(np.uint8),
    "f32": lambda bits: bits.view(np.float32),
    "s32": lambda bits: bits.view(np.int32),
}


def shape_of(ins: Instr) -> tuple[int, int, int] | None:
    match = next((_SHAPE.fullmatch(m) for m in ins.mods if _SHAPE.fullmatch(m)), None)
    return None if match is None else tuple(int(x) for x in match.groups())


def lane_flops(ins: Instr) -> int:
    """2 M N K a warp, shared by its 32 lanes; integer inputs count none (as elsewhere)."""
    shape = shape_of(ins)
    if shape is None or len(ins.types) < 4 or ins.types[-3] not in ("f16", "bf16", "tf32"):
        return 0
    m, n, k = shape
    return 2 * m * n * k // 32


# ----- fragment layouts (the ISA's) -------------------------------------------------
def _lanes(elements: int):
    """Per lane and element: the lane's group g, its thread t in the group, the element's
    index i; each (32, elements)."""
    lane = np.arange(32)[:, None]
    i = np.broadcast_to(np.arange(elements)[None, :], (32, elements))
    return lane // 4, lane % 4, i


def a_layout(k: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of A's elements, each (32 lanes, elements of a lane in order)."""
    g, t, i = _lanes(M * k // 32)
    r, p = i // e, i % e
    return g + 8 * (r % 2), e * t + p + 4 * e * (r // 2)


def b_layout(k: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    g, t, i = _lanes(k * N // 32)
    r, p = i // e, i % e
    return e * t + p + 4 * e * r, np.broadcast_to(g, i.shape)


def c_layout() -> tuple[np.ndarray, np.ndarray]:
    g, t, i = _lanes(M * N // 32)
    return g + 8 * (i // 2), 2 * t + i % 2


# ----- registers <-> elements ---------------------------------------------------------
def _named(ins: Instr, ch) -> str:
    """The instruction and where it is, for a refusal raised while it runs."""
    return f"{'mma.sync' if ins.op == 'mma' else ins.op} at {ch.m.log.where(ins.line)}"


def _registers(ch, operand: Operand, count: int | None = None) -> list[np.ndarray]:
    """The 32-bit registers of a fragment operand (``{%r1, %r2}``, or one register)."""
    items = operand.items if isinstance(operand, Vec) else (operand,)
    if count is not None and len(items) != count:
        raise Unsupported(f"{count} registers expected, {len(items)} given")
    if not all(isinstance(item, Reg) for item in items):
        raise Unsupported("fragment operands are registers")
    regs = [ch.registers.reg(item.name) for item in items]
    if any(reg.itemsize != 4 for reg in regs):
        raise Unsupported("fragment registers are 32-bit")
    return regs


def _words(regs: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """(warps, 32, registers) uint32."""
    return np.stack([reg.view(np.uint32)[rows] for reg in regs], axis=-1)


def _unpack(words: np.ndarray, type_: str) -> np.ndarray:
    """(..., registers) words -> (..., registers x e) values, lowest bits first."""
    size = BYTES[type_]
    if size == 4:
        return DECODE[type_](np.ascontiguousarray(words))
    shifts = np.arange(4 // size, dtype=np.uint32) * np.uint32(8 * size)
    bits = (words[..., None] >> shifts) & np.uint32((1 << 8 * size) - 1)
    return DECODE[type_](bits).reshape(*words.shape[:-1], -1)


def _pack(values: np.ndarray, type_: str) -> np.ndarray:
    """(..., registers x e) accumulator values -> (..., registers) words."""
    if type_ == "f16":
        bits = values.astype(np.float16).view(np.uint16).astype(np.uint32)
        return bits[..., 0::2] | (bits[..., 1::2] << np.uint32(16))
    return values.astype(np.float32 if type_ == "f32" else np.int32).view(np.uint32)


def _matrix(words: np.ndarray, type_: str, layout, shape) -> np.ndarray:
    """A warp's fragment words (warps, 32, registers) -> its matrices (warps, *shape)."""
    rows, cols = layout
    out = np.empty((words.shape[0], *shape), np.int64 if type_ in ("s8", "u8", "s32") else np.float64)
    out[:, rows, cols] = _unpack(words, type_)
    return out


# ----- mma.sync -----------------------------------------------------------------------
def _mma_types(ins: Instr) -> tuple[int, str, str, str, str]:
    """K and the D, A, B, C types; NotEmulated for what this module does not do."""
    shape = shape_of(ins)
    d, a, b, c = ins.types[-4:] if len(ins.types) >= 4 else ("",) * 4
    if shape is None or shape[:2] != (M, N) or a not in INPUTS:
        name = "m{}n{}k{}".format(*shape) if shape else "without a shape"
        raise NotEmulated(
            f"mma.sync {name} with .{a} inputs is not emulated (m16n8k* with .f16, .bf16, .tf32, "
            ".s8 or .u8 inputs is)"
        )
    ks, accumulators = INPUTS[a]
    partners = ("s8", "u8") if a in ("s8", "u8") else (a,)
    if shape[2] not in ks or b not in partners or d not in accumulators or c not in accumulators:
        raise Unsupported(f"the ISA has no mma.sync m16n8k{shape[2]} .{d}.{a}.{b}.{c}")
    if tuple(m for m in ins.mods if m in ("row", "col")) != ("row", "col"):
        raise Unsupported(f"mma.sync m16n8k{shape[2]} takes A row-major and B column-major (.row.col)")
    return shape[2], d, a, b, c


def build_mma(ins: Instr, ch):
    k, d_type, a_type, b_type, c_type = _mma_types(ins)
    d, a, b, c = (_registers(ch, o) for o in ins.operands[:4])
    e = 4 // BYTES[a_type]
    a_at, b_at, c_at = a_layout(k, e), b_layout(k, e), c_layout()
    saturate = "satfinite" in ins.mods

    def run(idx):
        rows = warp_rows(ch, idx, _named(ins, ch))
        left = _matrix(_words(a, rows), a_type, a_at, (M, k))
        right = _matrix(_words(b, rows), b_type, b_at, (k, N))
        acc = _matrix(_words(c, rows), c_type, c_at, (M, N))
        total = np.matmul(left, right) + acc  # f64: exact products, one rounding below
        if saturate:
            total = np.clip(total, -(2**31), 2**31 - 1)
        words = _pack(total[:, c_at[0], c_at[1]], d_type)
        for j, reg in enumerate(d):
            reg.view(np.uint32)[rows] = words[:, :, j]

    return run


# ----- ldmatrix / stmatrix ------------------------------------------------------------
def _matrices(ins: Instr) -> tuple[int, bool]:
    """How many 8 x 8 matrices (.x1, .x2, .x4), and whether transposed."""
    if "m8n8" not in ins.mods or "b16" not in ins.mods:
        raise NotEmulated(
            f"{ins.op} other than .m8n8 .b16 (8-bit and packed 4/6-bit matrices) is not emulated"
        )
    count = next((int(m[1]) for m in ins.mods if m in ("x1", "x2", "x4")), None)
    if count is None:
        raise Unsupported(f"{ins.op} needs .x1, .x2 or .x4")
    return count, "trans" in ins.mods


def spread(count: int, trans: bool) -> tuple[np.ndarray, np.ndarray]:
    """Where lane l's register j, half h comes from: (row among the warp's 8 x count
    rows, column), each (32, count, 2)."""
    lane = np.arange(32)[:, None, None]
    j = np.arange(count)[None, :, None]
    h = np.arange(2)[None, None, :]
    row, col = (2 * (lane % 4) + h, lane // 4) if trans else (lane // 4, 2 * (lane % 4) + h)
    return np.broadcast_to(8 * j + row, (32, count, 2)), np.broadcast_to(col, (32, count, 2))


def _row_addresses(ins: Instr, ch, get_addr, idx, count: int):
    """The executing warps (warps, 32), the lanes that give row addresses, their addresses."""
    rows = warp_rows(ch, idx, _named(ins, ch))
    givers = 8 * count
    addresses = np.asarray(get_addr(idx)).reshape(-1, 32)[:, :givers].reshape(-1)
    return rows, rows[:, :givers].reshape(-1), addresses


def build_ldmatrix(ins: Instr, ch) -> Executor:
    count, trans = _matrices(ins)
    regs = _registers(ch, ins.operands[0], count)
    access = Access(ins, ch, space_of(ins))
    get_addr = ch.address(ins.operands[1])
    src_row, src_col = spread(count, trans)
    columns = np.arange(8)

    def run(idx):
        rows, lanes, a = _row_addresses(ins, ch, get_addr, idx, count)
        groups = access.locate(lanes, a, ROW_BYTES, False, 2)
        access.traffic.count(lanes, a, ROW_BYTES, 8, False)
        data = garbage(a.size * 8, np.dtype(np.uint16)).reshape(-1, 8)
        for buf, pos, off in groups:
            data[slice(None) if pos is None else pos] = buf.view(np.uint16)[(off >> 1)[:, None] + columns]
            if buf is ch.shared.bytes:
                access.shadow.check(lanes, pos, off, ROW_BYTES, "read")
        halves = data.reshape(rows.shape[0], -1, 8)[:, src_row, src_col].astype(np.uint32)
        words = halves[..., 0] | (halves[..., 1] << np.uint32(16))
        for j, reg in enumerate(regs):
            reg.view(np.uint32)[rows] = words[:, :, j]

    return run


def build_stmatrix(ins: Instr, ch) -> Executor:
    count, trans = _matrices(ins)
    regs = _registers(ch, ins.operands[1], count)
    access = Access(ins, ch, space_of(ins))
    get_addr = ch.address(ins.operands[0])
    dst_row, dst_col = spread(count, trans)
    columns = np.arange(8)

    def run(idx):
        rows, lanes, a = _row_addresses(ins, ch, get_addr, idx, count)
        words = _words(regs, rows)
        halves = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)], axis=-1).astype(np.uint16)
        data = np.empty((rows.shape[0], 8 * count, 8), np.uint16)
        data[:, dst_row, dst_col] = halves
        data = data.reshape(-1, 8)
        groups = access.locate(lanes, a, ROW_BYTES, True, 2)
        access.traffic.count(lanes, a, ROW_BYTES, 8, True)
        for buf, pos, off in groups:
            row_data = data if pos is None else data[pos]
            if buf is ch.shared.bytes:
                pairs = row_data.view(np.uint32)
                access.shadow.check(
                    lanes, pos, off, ROW_BYTES, "write", values=[pairs[:, q] for q in range(4)]
                )
            buf.view(np.uint16)[(off >> 1)[:, None] + columns] = row_data

    return run
