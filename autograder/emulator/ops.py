"""The op table: one entry per PTX opcode, each building a closure ``run(idx)`` that computes
the instruction for lanes ``idx`` (None: every lane) with numpy. A comment marks each place
where the emulator's semantics differ from the hardware's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator import aborts, access, collective, mma, rounding, wmma
from autograder.emulator.isa import (
    BAR,
    BRA,
    CLOCK_REGISTERS,
    EXIT,
    PURE,
    SIDE,
    Executor,
    Imm,
    Instr,
    NotEmulated,
    Reg,
    Sreg,
    Vec,
    dtype_of,
    immediate_bits,
)
from autograder.emulator.memory import HEAP, LOCAL_REGION, REGION_SHIFT, SHARED_REGION, window_of
from autograder.emulator.rounding import two_sum

WIDE = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64", "s64": "s64", "u64": "u64"}
ROUNDING = ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna", "rs")


def instruction_kind(ins: Instr) -> int:
    if ins.op == "bra" and ins.target >= 0:
        return BRA
    if ins.op in ("ret", "exit"):
        return EXIT
    if ins.op in ("bar", "barrier") and "warp" not in ins.mods and "arrive" not in ins.mods:
        return BAR
    if ins.op in ("ld", "ldu") and access.names_a_parameter(ins):
        return PURE
    if ins.op in PURE_OPS and not reads_a_clock(ins):
        return PURE
    return SIDE


def reads_a_clock(ins: Instr) -> bool:
    """Does ``ins`` read ``%clock64`` and the like? Such an instruction runs as a ``SIDE``
    one, before which the scheduler hands its step count over (``special.py``)."""
    return any(type(o) is Sreg and o.name in CLOCK_REGISTERS for o in ins.operands)


def lane_flops(ins: Instr) -> int:
    if ins.op == "wmma" and "mma" in ins.mods:
        return wmma.MMA_LANE_FLOPS
    if ins.op == "mma":
        return mma.lane_flops(ins)
    if not ins.types or ins.types[-1] not in ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2"):
        return 0
    pairs = 2 if ins.types[-1].endswith("x2") else 1
    if ins.op in ("fma", "mad"):
        return 2 * pairs
    if ins.op in ("add", "sub", "mul"):
        return pairs
    return 0


def build_executor(ins: Instr, chunk):
    builder = OPS.get(ins.op)
    try:
        if builder is None:
            raise Unsupported(".".join((ins.op, *ins.mods)))
        builder = _packed_types(ins, builder)
        return builder(ins, chunk)
    except (Unsupported, KeyError, IndexError, ValueError, TypeError, AttributeError) as error:
        where = f"{chunk.m.filename}:{ins.line}" if ins.line else chunk.m.filename
        opcode = ".".join((ins.op, *ins.mods))
        message = f"{opcode} is not supported by the emulator ({where})"
        reason = str(error)
        if isinstance(error, NotEmulated):  # the feature is named: say where, nothing more
            message, reason = f"{where}: {error}", ""

        def unsupported(idx):
            raise Unsupported(message if reason in ("", opcode) else f"{message}: {reason}")

        return unsupported


MOVES_BITS = frozenset({"ld", "ldu", "st", "mov", "cvt", "selp", "shfl", "wmma", "atom", "red", "cp"})


def _packed_types(ins: Instr, builder):
    """f16x2 arithmetic works on the two halves of each 32-bit register, bf16 and bf16x2
    arithmetic on their values (``build_bf16``), ``setp.bf16`` compares values (``build_setp``)."""
    packed = ins.types[-1] if ins.types else None
    if packed == "f16x2" and ins.op in HALF_PAIR_OPS:
        return build_half_pairs
    if packed in ("bf16", "bf16x2") and (ins.op in BF16_OPS or ins.op == "set"):
        return build_bf16
    if packed == "bf16" and ins.op == "setp":
        return builder
    if packed in ("bf16", "bf16x2", "f16x2") and ins.op not in MOVES_BITS:
        raise Unsupported(f"{packed} arithmetic")
    return builder


HALF_PAIR_OPS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "min": np.fmin,
    "max": np.fmax,
    "neg": np.negative,
    "abs": np.abs,
    "fma": lambda a, b, c: a.astype(np.float64) * b + c,
}


def build_half_pairs(ins: Instr, ch) -> Executor:
    fn = HALF_PAIR_OPS[ins.op]
    gets = [ch.src(o, np.uint32) for o in ins.operands[1:]]
    put = ch.registers.dst(ins.operands[0], np.uint32)

    def run(idx):
        n = ch.n if idx is None else idx.size
        halves = []
        for get in gets:
            bits = np.ascontiguousarray(np.atleast_1d(get(idx)), dtype=np.uint32)
            pair = bits.view(np.float16)
            halves.append(np.tile(pair, n) if bits.size == 1 and n > 1 else pair)
        put(idx, np.asarray(fn(*halves)).astype(np.float16).view(np.uint32))

    return run


# ----- building blocks ------------------------------------------------------------
def lanewise(
    ins: Instr,
    ch,
    fn: Callable,
    src_type: str | None = None,
    dst_type: str | None = None,
    n_src: int | None = None,
) -> Executor:
    """``d = fn(a, b, ...)`` for the lanes of one instruction (an f32 result's NaNs made the
    H200's where the instruction computes it)."""
    st = dtype_of(src_type or ins.type)
    dt = dtype_of(dst_type or src_type or ins.type)
    if dt == np.float32 and ins.op in F32_ARITHMETIC:
        fn = _canonical_after(fn)
    srcs = ins.operands[1:] if n_src is None else ins.operands[1 : 1 + n_src]
    gets = [ch.src(o, st) for o in srcs]
    put = ch.registers.dst(ins.operands[0], dt)
    if len(gets) == 1:
        (a,) = gets
        return lambda idx: put(idx, fn(a(idx)))
    if len(gets) == 2:
        a, b = gets
        return lambda idx: put(idx, fn(a(idx), b(idx)))
    if len(gets) == 3:
        a, b, c = gets
        return lambda idx: put(idx, fn(a(idx), b(idx), c(idx)))
    return lambda idx: put(idx, fn(*[g(idx) for g in gets]))


# the f32 instructions whose NaN results an H200 makes 0x7FFFFFFF (not copysign, moves, selp)
F32_ARITHMETIC = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "min",
        "max",
        "abs",
        "neg",
        "fma",
        "mad",
        "sqrt",
        "rcp",
        "rsqrt",
        "ex2",
        "lg2",
    }
    | {"sin", "cos", "tanh"}
)


def _canonical_after(fn):
    return lambda *values: rounding.canonical(fn(*values))


def every_lane(fast, build_slow):
    """``run(idx)``: ``fast()`` when every lane runs (idx None), else the executor
    ``build_slow()`` returns, built the first time some lanes run alone (converged code never
    does: building only the fast path halves the cost of building an executor)."""
    slow = None

    def run(idx):
        nonlocal slow
        if idx is None:
            fast()
            return
        if slow is None:
            slow = build_slow()
        slow(idx)

    return run


def ufunc_op(ufunc: np.ufunc) -> Callable[[Instr, Any], Executor]:
    """A binary ufunc, computed in place into the destination register when possible."""

    def build(ins: Instr, ch) -> Executor:
        dt = dtype_of(ins.type)
        d = ch.registers.view(ins.operands[0], dt)
        a_full, b_full = (ch.full(o, dt) for o in ins.operands[1:3])
        if d is None or a_full is None or b_full is None:
            return lanewise(ins, ch, ufunc)
        if dt == np.float32:  # its NaNs made the H200's
            return every_lane(
                partial(_in_place_f32, ufunc, a_full, b_full, d), lambda: lanewise(ins, ch, ufunc)
            )
        return every_lane(partial(ufunc, a_full, b_full, out=d), lambda: lanewise(ins, ch, ufunc))

    return build


def _in_place_f32(ufunc, a, b, d) -> None:
    ufunc(a, b, out=d)
    if np.isnan(np.minimum.reduce(d)):
        d[np.isnan(d)] = rounding.F32_NAN


def _int_or_float(int_fn, float_fn):
    def build(ins, ch):
        return (ufunc_op(float_fn) if dtype_of(ins.type).kind == "f" else ufunc_op(int_fn))(ins, ch)

    return build


def _saturating(ins, ch, fn):
    """``.sat`` on s32: compute in int64 and clamp (float .sat clamps to [0, 1])."""
    if dtype_of(ins.type).kind == "f":
        return lanewise(ins, ch, lambda a, b: np.clip(fn(a, b), 0, 1))
    return lanewise(
        ins, ch, lambda a, b: np.clip(fn(a.astype(np.int64), b.astype(np.int64)), -(2**31), 2**31 - 1)
    )


def build_add(ins, ch):
    if modified_float(ins):
        return build_rounded(ins, ch, rounding.add)
    return _saturating(ins, ch, np.add) if "sat" in ins.mods else ufunc_op(np.add)(ins, ch)


def build_sub(ins, ch):
    if modified_float(ins):
        return build_rounded(ins, ch, lambda a, b, dt, mode: rounding.add(a, -b, dt, mode))
    return _saturating(ins, ch, np.subtract) if "sat" in ins.mods else ufunc_op(np.subtract)(ins, ch)


FLOAT_MODIFIERS = frozenset({*rounding.DIRECTED, "ftz", "sat"})


def modified_float(ins: Instr) -> bool:
    """A float instruction numpy does not round as asked: a directed mode, ``.ftz``, ``.sat``."""
    return ins.type in ("f32", "f64") and not FLOAT_MODIFIERS.isdisjoint(ins.mods)


def build_rounded(ins: Instr, ch, exact):
    """``d = op(a, ...)`` rounded as the instruction's modifiers say: ``exact(*operands, dtype, mode)``
    gives the result rounded to nearest and the sign of what that lost (``rounding.py``);
    ``.ftz`` flushes subnormal operands and results, ``.sat`` clamps to [0, 1]."""
    dt = dtype_of(ins.type)
    mode = next((m for m in ins.mods if m in rounding.DIRECTED), None)
    ftz, sat = "ftz" in ins.mods, "sat" in ins.mods

    def compute(*operands):
        values = [np.asarray(o, dt) for o in operands]
        if ftz:
            values = [rounding.flush(v) for v in values]
        near, residual = exact(*values, dt, mode)
        out = rounding.directed(near, residual, mode).astype(dt)
        if ftz:
            out = rounding.flush(out)
        return rounding.saturate(out) if sat else out

    return lanewise(ins, ch, compute)


def build_mul(ins: Instr, ch) -> Executor:
    dt = dtype_of(ins.type)
    if dt.kind == "f":
        return (
            build_rounded(ins, ch, rounding.multiply)
            if modified_float(ins)
            else ufunc_op(np.multiply)(ins, ch)
        )
    if "wide" in ins.mods:
        wide = dtype_of(WIDE[ins.type])

        def slow():
            return lanewise(ins, ch, lambda a, b: a.astype(wide) * b.astype(wide), ins.type, WIDE[ins.type])

        d = ch.registers.view(ins.operands[0], wide)
        a_full, b_full = (ch.full(o, dt) for o in ins.operands[1:3])
        if d is None or a_full is None or b_full is None:
            return slow()
        # the product of two values of the type, exact in the wide type: computed there
        return every_lane(partial(np.multiply, a_full, b_full, out=d, dtype=wide), slow)
    if "hi" in ins.mods:
        return lanewise(ins, ch, lambda a, b: mul_hi(a, b, dt))
    return ufunc_op(np.multiply)(ins, ch)


def mul_hi(a, b, dt: np.dtype):
    """The high half of the double-width product."""
    if dt.itemsize < 8:
        wide = np.int64 if dt.kind == "i" else np.uint64
        return ((np.asarray(a).astype(wide) * np.asarray(b).astype(wide)) >> (8 * dt.itemsize)).astype(dt)
    ua = np.asarray(a).astype(np.uint64)
    ub = np.asarray(b).astype(np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    a_lo, a_hi = ua & mask, ua >> np.uint64(32)
    b_lo, b_hi = ub & mask, ub >> np.uint64(32)
    lo_lo = a_lo * b_lo
    mid1 = a_hi * b_lo + (lo_lo >> np.uint64(32))
    mid2 = a_lo * b_hi + (mid1 & mask)
    hi = a_hi * b_hi + (mid1 >> np.uint64(32)) + (mid2 >> np.uint64(32))
    if dt.kind == "i":  # signed: subtract b when a < 0 and a when b < 0 (two's complement)
        hi = hi - np.where(np.asarray(a) < 0, ub, 0).astype(np.uint64)
        hi = hi - np.where(np.asarray(b) < 0, ua, 0).astype(np.uint64)
    return hi.view(np.int64) if dt.kind == "i" else hi


def build_mad(ins: Instr, ch) -> Executor:
    dt = dtype_of(ins.type)
    if dt.kind == "f":
        return build_fma(ins, ch)
    if "wide" in ins.mods:
        wide = dtype_of(WIDE[ins.type])
        c = ch.src(ins.operands[3], wide)
        a, b = (ch.src(o, dt) for o in ins.operands[1:3])
        put = ch.registers.dst(ins.operands[0], wide)
        return lambda idx: put(idx, a(idx).astype(wide) * b(idx).astype(wide) + c(idx))
    if "hi" in ins.mods:
        return lanewise(ins, ch, lambda a, b, c: mul_hi(a, b, dt) + c)
    d = ch.registers.view(ins.operands[0], dt)
    fulls = [ch.full(o, dt) for o in ins.operands[1:4]]
    if d is None or any(f is None for f in fulls):
        return lanewise(ins, ch, _mad)
    a_full, b_full, c_full = fulls
    product = ch.registers.scratch(dt)  # not d: the addend is often d itself (``t += x * w``)

    def fast():
        np.multiply(a_full, b_full, out=product)
        np.add(product, c_full, out=d)

    return every_lane(fast, lambda: lanewise(ins, ch, _mad))


def _mad(a, b, c):
    return a * b + c


def build_fma(ins: Instr, ch) -> Executor:
    dt = dtype_of(ins.type)
    if dt == np.float64 or modified_float(ins):
        return build_rounded(ins, ch, rounding.fma)
    if dt == np.float32:
        # f32 products are exact in f64, so one f64 add then one rounding to f32 is a
        # fused multiply-add except for rare double-rounding ties.
        d = ch.registers.view(ins.operands[0], dt)
        fulls = [ch.full(o, dt) for o in ins.operands[1:4]]
        if d is None or any(f is None for f in fulls):
            return lanewise(ins, ch, _fma_f32)
        a_full, b_full, c_full = fulls
        product, total = ch.registers.scratch(np.float64), ch.registers.scratch(np.float64, slot=1)

        def fast():
            np.multiply(a_full, b_full, out=product, dtype=np.float64)
            np.add(product, c_full, out=total)
            rounding.settle(d, total, product, c_full)  # rounded once from the exact sum

        return every_lane(fast, lambda: lanewise(ins, ch, _fma_f32))
    # f16 products are exact in f64, and so is their sum with an f16: one rounding, as fused
    return lanewise(ins, ch, lambda a, b, c: (a.astype(np.float64) * b + c).astype(dt))


def _fma_f32(a, b, c):
    """The product exact in f64, the sum rounded to odd there, then once to f32."""
    s, e = two_sum(np.multiply(a, b, dtype=np.float64), np.asarray(c, np.float64))
    return rounding.canonical(rounding.to_odd(s, e).astype(np.float32))


FUSED_LANES = 8192  # chunks of up to this many lanes run a run of independent fmas or wmma.mmas as one


def fma_runs(program: list[Instr], registers: dict[str, str]) -> list[int]:
    """Per instruction: how many independent f32 ``fma``s, or ``wmma.mma``s, run from it on (two
    at least; else 0): unguarded, on registers only (an fma's all f32), one opcode a run, none
    reading or writing a register an earlier one of the run writes. A register tile's update is
    such a run (V*V fmas), and so is a warp's tile of accumulator fragments (FRAG_M*FRAG_N
    mmas); ``build_run`` computes one as one instruction, with the results of one at a time."""
    runs = [0] * len(program)
    start, written, op = 0, set(), None
    for k, ins in enumerate(program):
        fused = _run_registers(ins, registers)
        if fused is None or ins.op != op or written.intersection(fused[1]):
            _close_run(runs, start, k)
            start, written, op = (k + 1, set(), None) if fused is None else (k, set(), ins.op)
        if fused is not None:
            written.update(fused[0])
    _close_run(runs, start, len(program))
    return runs


def _close_run(runs: list[int], start: int, end: int) -> None:
    """Instructions ``start .. end - 1`` are a run: from each on, what is left of it (two at least)."""
    for j in range(start, end - 1):
        runs[j] = end - j


def _run_registers(ins: Instr, registers: dict[str, str]) -> tuple[list[str], list[str]] | None:
    """The registers an instruction of a run writes and those it names, or None where it can
    be part of no run (``fma_runs``)."""
    if ins.op == "wmma":
        return wmma.mma_registers(ins)
    if not _fusable_fma(ins, registers):
        return None
    names = [o.name for o in ins.operands]
    return names[:1], names


def _fusable_fma(ins: Instr, registers: dict[str, str]) -> bool:
    return (
        ins.op == "fma"
        and ins.guard is None
        and dtype_of(ins.type) == np.float32
        and len(ins.operands) == 4
        and all(type(o) is Reg and not o.negate and registers.get(o.name) == "f32" for o in ins.operands)
    )


def build_run(run: list[Instr], ch) -> Callable[[], None]:
    """The executor of a run (``fma_runs``) for every lane of chunk ``ch``: a run of wmma.mmas
    whose fragments ``wmma.build_mma_run`` cannot gather at once runs each instruction's own."""
    if run[0].op != "wmma":
        return build_fma_run(run, ch)
    fused = wmma.build_mma_run(run, ch)
    if fused is not None:
        return fused
    each = [build_executor(ins, ch) for ins in run]

    def one_by_one() -> None:
        for executor in each:
            executor(None)

    return one_by_one


def build_fma_run(run: list[Instr], ch) -> Callable[[], None]:
    """``fma.f32 d, a, b, c`` for every lane of each instruction of ``run`` (``fma_runs``), as
    ``build_fma`` computes one: each product exact in f64, its sum rounded once to f32. A
    register tile's update multiplies each of U registers by each of V (``_outer``): one
    broadcast product of the U and the V rows instead of U*V rows of each."""
    rows = [[ch.registers.row(o.name) for o in ins.operands] for ins in run]
    table = rows[0][0][0]
    d, a, b, c = (np.array([r[k][1] for r in rows]) for k in range(4))
    total = ch.registers.scratch(np.float64, len(run))
    addend = _rows(ch, table, c, 0)
    outer = _outer(a, b)
    if outer is not None:
        left, right = (_rows(ch, table, index, slot) for slot, index in enumerate(outer, 1))
        grid = total.reshape(len(outer[0]), len(outer[1]), ch.n)

        def multiply():
            np.multiply(left()[:, None, :], right()[None, :, :], out=grid, dtype=np.float64)
    else:
        left, right = _rows(ch, table, a, 1), _rows(ch, table, b, 2)

        def multiply():
            np.multiply(left(), right(), out=total, dtype=np.float64)

    out = table[d[0] : d[0] + len(run)] if _consecutive(d) else None

    sums = ch.registers.scratch(np.float64, len(run), slot=3)
    narrow = ch.registers.scratch(np.float32, len(run), slot=4) if out is None else out

    def fused():
        multiply()
        c = addend()
        np.add(total, c, out=sums)
        rounding.settle(narrow, sums, total, c)  # each sum rounded once from the exact one
        if out is None:
            table[d] = narrow

    return fused


def _outer(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(u, v) where the run multiplies each of registers u by each of v in order (``a`` is u
    with each repeated len(v) times, ``b`` is v repeated len(u) times); else None. In Python on
    the run's few rows (numpy's calls on them were a third of building a run)."""
    left, right = a.tolist(), b.tolist()
    step = next((j for j, row in enumerate(left) if row != left[0]), len(left))
    if len(left) % step:
        return None
    u, v = left[::step], right[:step]
    if left == [row for row in u for _ in range(step)] and right == v * len(u):
        return a[::step], b[:step]
    return None


def _outer_reference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``_outer`` as numpy works it out (tests/emulator/test_build_first.py)."""
    step = int(np.argmax(a != a[0])) if (a != a[0]).any() else len(a)
    if len(a) % step:
        return None
    u, v = a[::step], b[:step]
    if np.array_equal(a, np.repeat(u, step)) and np.array_equal(b, np.tile(v, len(u))):
        return u, v
    return None


def _consecutive(index: np.ndarray) -> bool:
    """Is each of ``index`` (a few register rows) one more than the one before? In Python: a run
    of fmas asks of 4 index arrays when built, and ``np.diff`` took half of building it."""
    rows = index.tolist()
    return not rows or rows == list(range(rows[0], rows[0] + len(rows)))


def _consecutive_reference(index: np.ndarray) -> bool:
    """``_consecutive`` as numpy works it out (tests/emulator/test_build_first.py)."""
    return bool((np.diff(index) == 1).all())


def _rows(ch, table: np.ndarray, index: np.ndarray, slot: int) -> Callable[[], np.ndarray]:
    """``() ->`` the rows ``index`` of ``table``: a view where they are consecutive, else gathered
    into the chunk's scratch ``slot``."""
    if _consecutive(index):
        view = table[index[0] : index[0] + len(index)]
        return lambda: view
    gathered = ch.registers.scratch(table.dtype, len(index), slot)
    return lambda: table.take(index, axis=0, out=gathered)


def build_div(ins, ch):
    dt = dtype_of(ins.type)
    if dt.kind == "f":
        if "approx" in ins.mods or "full" in ins.mods:  # within the ISA's bound of the exact quotient
            return (
                build_rounded(ins, ch, rounding.divide) if "ftz" in ins.mods else ufunc_op(np.divide)(ins, ch)
            )
        return (
            build_rounded(ins, ch, rounding.divide) if modified_float(ins) else ufunc_op(np.divide)(ins, ch)
        )
    return lanewise(ins, ch, lambda a, b: int_div(a, b, dt))


def int_div(a, b, dt):
    """C division, truncating toward zero, wrapping (MIN / -1 is MIN); x / 0 is all ones bits on
    an H200 (measured)."""
    a, b = np.asarray(a).astype(dt), np.asarray(b).astype(dt)
    zero = b == 0
    if dt.kind == "u":
        q = a // np.where(zero, 1, b).astype(dt)
    else:  # magnitudes as unsigned, where |MIN| fits
        magnitude = np.dtype(f"u{dt.itemsize}")
        q = (_magnitude(a, magnitude) // _magnitude(np.where(zero, 1, b).astype(dt), magnitude)).view(dt)
        q = np.where((a < 0) != (b < 0), -q, q).astype(dt)
    return np.where(zero, np.array(-1).astype(dt), q).astype(dt)


def _magnitude(a, unsigned):
    bits = a.view(unsigned)
    return np.where(a < 0, ~bits + unsigned.type(1), bits)


def build_rem(ins, ch):
    dt = dtype_of(ins.type)
    # C remainder takes the sign of the dividend; x % 0 is all ones bits (measured)
    return lanewise(ins, ch, lambda a, b: int_rem(a, b, dt))


def int_rem(a, b, dt):
    a, b = np.asarray(a).astype(dt), np.asarray(b).astype(dt)
    with np.errstate(over="ignore"):
        r = (a - int_div(a, b, dt) * b).astype(dt)
    return np.where(b == 0, np.array(-1).astype(dt), r).astype(dt)


def build_min(ins, ch):
    return _extreme(ins, ch, smaller=True)


def build_max(ins, ch):
    return _extreme(ins, ch, smaller=False)


def _extreme(ins: Instr, ch, smaller: bool):
    """min/max: integers as numpy; floats ignore a NaN operand (``.NaN``: propagate it) and put
    -0 below +0 (measured); ``.ftz`` flushes subnormal operands first."""
    if dtype_of(ins.type).kind != "f":
        return ufunc_op(np.minimum if smaller else np.maximum)(ins, ch)
    ftz, propagate = "ftz" in ins.mods, "NaN" in ins.mods

    def extreme(a, b):
        if ftz:
            a, b = rounding.flush(a), rounding.flush(b)
        out = _ordered(a, b, smaller)
        return np.where(np.isnan(a) | np.isnan(b), a + b, out) if propagate else out

    return lanewise(ins, ch, extreme)


def build_abs(ins, ch):
    return lanewise(ins, ch, lambda a: np.abs(rounding.flush(a)) if "ftz" in ins.mods else np.abs(a))


def build_neg(ins, ch):
    return lanewise(ins, ch, lambda a: -rounding.flush(a) if "ftz" in ins.mods else np.negative(a))


def build_not(ins, ch):
    return lanewise(ins, ch, np.logical_not if ins.type == "pred" else np.invert)


def build_cnot(ins, ch):
    dt = dtype_of(ins.type)
    return lanewise(ins, ch, lambda a: (a == 0).astype(dt))


def _logic(int_fn, bool_fn):
    def build(ins, ch):
        return ufunc_op(bool_fn if ins.type == "pred" else int_fn)(ins, ch)

    return build


def build_shl(ins, ch):
    dt = dtype_of(ins.type)
    bits = 8 * dt.itemsize
    # PTX clamps shift amounts >= the width (the result is 0); numpy's would be undefined.
    return (
        lanewise(
            ins,
            ch,
            lambda a, b: np.where(b >= bits, 0, a << (b % bits).astype(dt)).astype(dt),
            n_src=2,
            src_type=None,
        )
        if not _small_imm(ins, bits)
        else ufunc_op(np.left_shift)(ins, ch)
    )


def build_shr(ins, ch):
    dt = dtype_of(ins.type)
    bits = 8 * dt.itemsize
    if _small_imm(ins, bits):
        return ufunc_op(np.right_shift)(ins, ch)
    if dt.kind == "i":  # arithmetic shift by >= width fills with the sign bit
        return lanewise(ins, ch, lambda a, b: a >> np.minimum(b, bits - 1).astype(dt))
    return lanewise(ins, ch, lambda a, b: np.where(b >= bits, 0, a >> (b % bits).astype(dt)).astype(dt))


def _small_imm(ins, bits: int) -> bool:
    shift = ins.operands[2]
    return isinstance(shift, Imm) and 0 <= int(immediate_bits(shift.text, "")) < bits


def build_popc(ins, ch):
    return lanewise(ins, ch, popcount, dst_type="u32", src_type=ins.type)


_BYTE_BITS = np.array([bin(k).count("1") for k in range(256)], np.uint32)


def popcount(a):
    a = np.ascontiguousarray(np.atleast_1d(a))
    return _BYTE_BITS[a.view(np.uint8)].reshape(a.size, a.itemsize).sum(axis=1, dtype=np.uint32)


def build_clz(ins, ch):
    bits = 8 * dtype_of(ins.type).itemsize
    return lanewise(
        ins, ch, lambda a: (bits - bit_length(a)).astype(np.uint32), src_type=ins.type, dst_type="u32"
    )


def bit_length(a):
    x = np.asarray(a).astype(np.uint64)
    hi = (x >> np.uint64(32)).astype(np.float64)
    lo = (x & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return np.where(hi > 0, np.frexp(hi)[1] + 32, np.frexp(lo)[1]).astype(np.int64)


def build_brev(ins, ch):
    dt = dtype_of(ins.type)
    bits = 8 * dt.itemsize

    def brev(a):
        x = np.asarray(a).astype(np.uint64)
        out = np.zeros(x.shape, np.uint64)
        for k in range(bits):
            out |= ((x >> np.uint64(k)) & np.uint64(1)) << np.uint64(bits - 1 - k)
        return out.astype(dt)

    return lanewise(ins, ch, brev)


def build_bfind(ins, ch):
    """Position of the most significant non-sign bit (or its distance from the top)."""
    dt = dtype_of(ins.type)
    bits = 8 * dt.itemsize

    def bfind(a):
        x = np.asarray(a)
        if dt.kind == "i":
            x = np.where(x < 0, ~x, x)
        length = bit_length(np.asarray(x).astype(dt).view(np.dtype(f"u{dt.itemsize}")))
        pos = length - 1
        if "shiftamt" in ins.mods:
            pos = np.where(length > 0, bits - 1 - pos, -1)
        return np.where(length > 0, pos, -1).astype(np.int64).astype(np.uint32)

    return lanewise(ins, ch, bfind, src_type=ins.type, dst_type="u32")


def build_sad(ins, ch):
    dt = dtype_of(ins.type)
    wide = np.int64 if dt.kind == "i" else np.uint64
    return lanewise(
        ins,
        ch,
        lambda a, b, c: (
            np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(wide) + c.astype(wide)
        ).astype(dt),
    )


def build_bfe(ins: Instr, ch) -> Executor:
    """Bit field extract, as the ISA writes it: ``len`` bits of ``a`` from ``pos`` (each taken
    from its operand's low 8 bits), bits past the source's top one and above ``len`` are the
    sign bit (``.s``: ``a[min(pos + len - 1, msb)]``) or zero (``.u``)."""
    dt = dtype_of(ins.type)
    bits = 8 * dt.itemsize
    a = ch.src(ins.operands[1], dt)
    pos_, len_ = (ch.src(o, np.uint32) for o in ins.operands[2:4])
    put = ch.registers.dst(ins.operands[0], dt)

    def bfe(a, pos, length):
        pos, length = _field_operand(pos, bits), _field_operand(length, bits)
        ux = np.asarray(a).astype(dt).view(np.dtype(f"u{dt.itemsize}")).astype(np.uint64)
        taken = np.clip(bits - pos, 0, length)
        field = np.where(pos < bits, ux >> np.minimum(pos, 63).astype(np.uint64), np.uint64(0)) & _low_bits(
            taken
        )
        if dt.kind == "i":
            top = np.minimum(pos + length - 1, bits - 1).astype(np.uint64)
            sign = ((ux >> top) & np.uint64(1)).astype(bool) & (length > 0)
            field = field | np.where(sign, ~_low_bits(taken), np.uint64(0))
        return field.astype(np.dtype(f"u{dt.itemsize}")).view(dt)

    return lambda idx: put(idx, bfe(a(idx), pos_(idx), len_(idx)))


def _field_operand(value, bits: int) -> np.ndarray:
    """A bit field's position or length: its operand's low 8 bits (measured on the H200 for
    32-bit fields; 64-bit ones clamp the whole operand to 255)."""
    value = np.asarray(value).astype(np.int64)
    return (value & 0xFF) if bits == 32 else np.minimum(value, 255)


def _low_bits(n) -> np.ndarray:
    """Masks of the ``n`` low bits (``n`` up to 64 and beyond), as uint64."""
    n = np.asarray(n).astype(np.int64)
    ones = (np.uint64(1) << np.minimum(n, 63).astype(np.uint64)) - np.uint64(1)
    return np.where(n >= 64, np.uint64(0xFFFFFFFFFFFFFFFF), ones)


def build_bfi(ins: Instr, ch) -> Executor:
    """Bit field insert: ``b`` with bits ``pos .. pos + len - 1`` (those below the top) taken
    from the low bits of ``a``."""
    dt = dtype_of(ins.type)
    u = np.dtype(f"u{dt.itemsize}")
    bits = 8 * dt.itemsize
    a, b = (ch.src(o, u) for o in ins.operands[1:3])
    pos_, len_ = (ch.src(o, np.uint32) for o in ins.operands[3:5])
    put = ch.registers.dst(ins.operands[0], u)

    def run(idx):
        pos, length = _field_operand(pos_(idx), bits), _field_operand(len_(idx), bits)
        inside = pos < bits
        shift = np.minimum(pos, 63).astype(np.uint64)
        mask = np.where(inside, _low_bits(np.clip(bits - pos, 0, length)) << shift, np.uint64(0))
        av = np.asarray(a(idx)).astype(np.uint64)
        bv = np.asarray(b(idx)).astype(np.uint64)
        put(idx, ((bv & ~mask) | ((av << shift) & mask)).astype(u))

    return run


# prmt's modes: which byte of {b, a} each byte of d takes, from the selector's low two bits
PRMT_MODES = {
    "f4e": lambda c, i: (c + i) % 8,  # forward 4 extract
    "b4e": lambda c, i: (c - i) % 8,  # backward 4 extract
    "rc8": lambda c, i: c,  # replicate 8
    "ecl": lambda c, i: np.maximum(c, i),  # edge clamp left
    "ecr": lambda c, i: np.minimum(c, i),  # edge clamp right
    "rc16": lambda c, i: 2 * (c & 1) + (i & 1),  # replicate 16
}


def build_prmt(ins: Instr, ch) -> Executor:
    """Byte permute: each byte of d is a byte of the pair {b, a} that the selector names (its
    top bit replicating that byte's sign), or, in a mode, a fixed pattern (``PRMT_MODES``)."""
    mode = next((PRMT_MODES[m] for m in ins.mods if m in PRMT_MODES), None)
    a, b, c = (ch.src(o, np.uint32) for o in ins.operands[1:4])
    put = ch.registers.dst(ins.operands[0], np.uint32)

    def run(idx):
        av = np.asarray(a(idx)).astype(np.uint64)
        bv = np.asarray(b(idx)).astype(np.uint64)
        sel = np.asarray(c(idx)).astype(np.uint64)
        both = av | (bv << np.uint64(32))
        out = np.zeros(np.broadcast(av, bv, sel).shape, np.uint64)
        for k in range(4):
            if mode is None:
                s = (sel >> np.uint64(4 * k)) & np.uint64(0xF)
            else:
                s = np.asarray(mode(sel & np.uint64(3), np.uint64(k))).astype(np.uint64)
            byte = (both >> ((s & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            byte = np.where(
                s & np.uint64(8), np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0)), byte
            )
            out |= byte << np.uint64(8 * k)
        put(idx, out.astype(np.uint32))

    return run


def build_shf(ins: Instr, ch) -> Executor:
    """Funnel shift of the 64-bit pair b:a, keeping the high (.l) or low (.r) 32 bits."""
    a, b, n = (ch.src(o, np.uint32) for o in ins.operands[1:4])
    put = ch.registers.dst(ins.operands[0], np.uint32)
    left = "l" in ins.mods
    wrap = "wrap" in ins.mods

    def run(idx):
        pair = (np.asarray(b(idx)).astype(np.uint64) << np.uint64(32)) | np.asarray(a(idx)).astype(np.uint64)
        amount = np.asarray(n(idx)).astype(np.uint64)
        amount = amount & np.uint64(31) if wrap else np.minimum(amount, np.uint64(32))
        value = (pair << amount) >> np.uint64(32) if left else pair >> amount
        put(idx, (value & np.uint64(0xFFFFFFFF)).astype(np.uint32))

    return run


COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "lo": np.less,
    "ls": np.less_equal,
    "hi": np.greater,
    "hs": np.greater_equal,
}


def compare_fn(ins: Instr):
    cmp = next(
        m for m in ins.mods if m in COMPARE or (m.endswith("u") and m[:-1] in COMPARE) or m in ("num", "nan")
    )
    if cmp == "num":
        return lambda a, b: ~(np.isnan(a) | np.isnan(b))
    if cmp == "nan":
        return lambda a, b: np.isnan(a) | np.isnan(b)
    if cmp in COMPARE:
        # ordered comparisons are false with a NaN operand, except ne which numpy makes true
        if cmp == "ne" and dtype_of(ins.type).kind == "f":
            return lambda a, b: np.not_equal(a, b) & ~(np.isnan(a) | np.isnan(b))
        return COMPARE[cmp]
    base = COMPARE[cmp[:-1]]
    return lambda a, b: base(a, b) | np.isnan(a) | np.isnan(b)


BOOL_OPS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def build_setp(ins: Instr, ch) -> Executor:
    fn = compare_fn(ins)
    dt = dtype_of(ins.type)
    dsts = ins.operands[0].items if isinstance(ins.operands[0], Vec) else (ins.operands[0],)
    combine = next((BOOL_OPS[m] for m in ins.mods if m in BOOL_OPS), None)
    if len(dsts) == 1 and combine is None and isinstance(fn, np.ufunc) and ins.type != "bf16":
        d_view = ch.registers.view(dsts[0], np.bool_)
        a_full, b_full = (ch.full(o, dt) for o in ins.operands[1:3])
        if d_view is not None and a_full is not None and b_full is not None:
            return every_lane(
                partial(fn, a_full, b_full, out=d_view), lambda: _setp(ins, ch, fn, dt, dsts, combine)
            )
    return _setp(ins, ch, fn, dt, dsts, combine)


def _setp(ins: Instr, ch, fn: Callable, dt: np.dtype, dsts: Sequence, combine: Callable | None) -> Executor:
    a, b = (ch.src(o, dt) for o in ins.operands[1:3])
    c = ch.src(ins.operands[3], np.bool_) if combine else None
    puts = [ch.registers.dst(d, np.bool_) for d in dsts]
    if ins.type == "bf16":  # compare the values the bits stand for
        a, b = (lambda idx, get=get: bf16_values(get(idx)) for get in (a, b))

    def run(idx):
        value = fn(a(idx), b(idx))
        if combine is None:
            puts[0](idx, value)
            if len(puts) > 1:
                puts[1](idx, ~value)
            return
        cv = c(idx)
        puts[0](idx, combine(value, cv))
        if len(puts) > 1:
            puts[1](idx, combine(~value, cv))

    return run


def build_set(ins: Instr, ch) -> Executor:
    """``set.cmp{.bool}.dtype.stype d, a, b{, c}``: all ones (1.0 for f32) where the comparison,
    combined with predicate ``c`` by ``.and``/``.or``/``.xor``, holds, else 0."""
    fn = compare_fn(ins)
    dst_type, src_type = ins.types[0], ins.types[-1]
    dt = dtype_of(dst_type)
    true = np.float32(1.0) if dt.kind == "f" else np.array(-1).astype(dt)
    combine = next((BOOL_OPS[m] for m in ins.mods if m in BOOL_OPS), None)
    a, b = (ch.src(o, dtype_of(src_type)) for o in ins.operands[1:3])
    c = ch.src(ins.operands[3], np.bool_) if combine else None
    put = ch.registers.dst(ins.operands[0], dt)

    def run(idx):
        holds = fn(a(idx), b(idx))
        if combine is not None:
            holds = combine(holds, c(idx))
        put(idx, np.where(holds, true, dt.type(0)).astype(dt))

    return run


def build_selp(ins: Instr, ch) -> Executor:
    dt = dtype_of(ins.type)
    a, b = (ch.src(o, dt) for o in ins.operands[1:3])
    c = ch.src(ins.operands[3], np.bool_)
    put = ch.registers.dst(ins.operands[0], dt)
    return lambda idx: put(idx, np.where(c(idx), a(idx), b(idx)))


def build_mov(ins: Instr, ch) -> Executor:
    dt = dtype_of(ins.type)
    dst, src = ins.operands[0], ins.operands[1]
    if isinstance(dst, Vec):  # unpack: mov.b64 {lo, hi}, %rd
        part = np.dtype(f"u{dt.itemsize // len(dst.items)}")
        get = ch.src(src, dt)
        puts = [ch.registers.dst(d, part) for d in dst.items]

        def unpack(idx):
            raw = np.ascontiguousarray(np.atleast_1d(get(idx))).view(part).reshape(-1, len(puts))
            for k, put in enumerate(puts):
                put(idx, raw[:, k])

        return unpack
    if isinstance(src, Vec):  # pack: mov.b64 %rd, {lo, hi}
        part = np.dtype(f"u{dt.itemsize // len(src.items)}")
        gets = [ch.src(s, part) for s in src.items]
        put = ch.registers.dst(dst, dt)

        def pack(idx):
            n = ch.n if idx is None else idx.size
            parts = np.stack([np.broadcast_to(g(idx), (n,)) for g in gets], axis=1).astype(part)
            put(idx, np.ascontiguousarray(parts).view(dt).reshape(-1))

        return pack
    get = ch.src(src, dt)
    put = ch.registers.dst(dst, dt)
    return lambda idx: put(idx, get(idx))


def build_cvta(ins, ch):
    window = {"shared": SHARED_REGION << REGION_SHIFT, "local": LOCAL_REGION << REGION_SHIFT}
    space = next((m for m in ins.mods if m in ("global", "shared", "local", "const", "param")), "global")
    base = window.get(space, 0)
    dt = dtype_of(ins.type)
    if "to" in ins.mods:  # generic -> space address (wrapping, then truncated to the type)
        return lanewise(
            ins,
            ch,
            lambda a: (a.astype(np.uint64) - np.uint64(base)).astype(dt) if base else a,
            src_type="u64",
            dst_type=ins.type,
        )
    return lanewise(
        ins, ch, lambda a: a.astype(np.uint64) + np.uint64(base), src_type=ins.type, dst_type="u64"
    )


def build_isspacep(ins, ch):
    """``isspacep.space p, a``: does the generic address ``a`` lie in that space (``__isGlobal``,
    ``__isShared``, ``__isLocal``): global allocations lie in the heap, shared and local memory
    in their windows (``memory.py``)."""
    space = next(m.split("::")[0] for m in ins.mods if m.split("::")[0] in ("global", "shared", "local"))
    if space == "global":
        test = lambda a: (a >= HEAP[0]) & (a < HEAP[1])  # noqa: E731
    else:
        region = SHARED_REGION if space == "shared" else LOCAL_REGION
        test = lambda a: window_of(a) == region  # noqa: E731
    return lanewise(ins, ch, lambda a: test(np.asarray(a, np.uint64)), src_type="u64", dst_type="pred")


# ----- conversions ---------------------------------------------------------------
INT_ROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def build_cvt(ins, ch):
    dst_type, src_type = ins.types[0], ins.types[1]
    mode = next((m for m in ins.mods if m in ROUNDING), None)
    sat, ftz = "sat" in ins.mods, "ftz" in ins.mods
    if dst_type == "tf32":
        return lanewise(ins, ch, lambda a: tf32_bits(a, mode, "satfinite" in ins.mods), src_type, "u32")
    if src_type == "bf16":  # exactly the f32 whose top half it is, converted from there
        return lanewise(
            ins, ch, lambda a: convert(bf16_values(a), dst_type, "f32", mode, sat), src_type, dst_type
        )
    if dst_type in ("bf16", "bf16x2"):
        return build_cvt_to_bf16(ins, ch, mode or "rn")
    if dst_type == "f16x2":  # cvt.rn.f16x2.f32 d, a, b: a in the upper half, b in the lower
        halves = lambda a, b: (_f16_bits(a, mode) << np.uint32(16)) | _f16_bits(b, mode)  # noqa: E731
        return lanewise(ins, ch, halves, src_type, "u32")
    return lanewise(
        ins,
        ch,
        lambda a: convert(a, dst_type, src_type, mode, sat, ftz),
        src_type=src_type,
        dst_type=dst_type,
    )


def _f16_bits(a, mode):
    return convert(a, "f16", "f32", mode, False).view(np.uint16).astype(np.uint32)


def convert(a, dst_type: str, src_type: str, mode: str | None, sat: bool, ftz: bool = False):
    dt, st = dtype_of(dst_type), dtype_of(src_type)
    a = np.asarray(a)
    if dt.kind in "iu" and st.kind == "f":
        return float_to_int(a, dt, mode)
    if dt.kind in "iu":
        return saturated(a, dt) if sat else a.astype(dt)  # else truncation or extension by the source's type
    if ftz:
        a = rounding.flush(a)
    if mode in INT_ROUND:  # cvt.rni.f32.f32: round to an integral value
        out = INT_ROUND[mode](a).astype(dt)
    elif st.kind == "f" and dt.itemsize >= st.itemsize:
        out = a.astype(dt)  # exact
    else:  # narrower floats and integers: rounded as asked
        out = rounding.directed(*rounding.narrowed(a, dt), mode).astype(dt)
    if ftz:
        out = rounding.flush(out)
    if sat:
        out = rounding.saturate(out)
    return rounding.canonical(out) if st.kind == "f" and st.itemsize <= 4 else out


def float_to_int(a, dt: np.dtype, mode: str | None):
    """Rounded as asked (``.rzi`` by default) and saturated; NaN becomes 0 from an f32 into 32
    bits or fewer, else the integer with only its top bit set (measured on the H200)."""
    rounded = INT_ROUND.get(mode or "rzi", np.trunc)(a.astype(np.float64))
    info = np.iinfo(dt)
    nan = np.isnan(rounded)
    high, low = rounded >= float(info.max), rounded <= float(info.min)
    out = np.where(high | low | nan, 0.0, rounded).astype(dt)
    out = np.where(high, dt.type(info.max), np.where(low, dt.type(info.min), out))
    nan_value = 0 if a.dtype == np.float32 and dt.itemsize <= 4 else 1 << (8 * dt.itemsize - 1)
    return np.where(nan, np.array(nan_value, np.uint64).astype(dt), out).astype(dt)


def saturated(a, dt: np.dtype):
    """An integer clamped to the range of the integer type ``dt``."""
    src, dst = np.iinfo(a.dtype), np.iinfo(dt)
    low, high = max(src.min, dst.min), min(src.max, dst.max)
    return np.clip(a, a.dtype.type(low), a.dtype.type(high)).astype(dt)


def build_cvt_to_bf16(ins: Instr, ch, rounding: str):
    """``cvt.{rn,rz,rm,rp}{.relu}.bf16`` from a float or an integer, rounded once from the
    exact value; ``.bf16x2.f32 d, a, b`` puts ``a`` in the upper half, ``b`` in the lower."""
    src_type = ins.types[1]
    relu = "relu" in ins.mods

    def to_bf16(a):
        return bf16_bits(*exactly(a, src_type), rounding, relu)

    if ins.types[0] == "bf16x2":
        return lanewise(ins, ch, lambda a, b: (to_bf16(a) << np.uint32(16)) | to_bf16(b), src_type, "u32")
    return lanewise(ins, ch, to_bf16, src_type, "u16")


def exactly(a, type_: str):
    """Values of a PTX type as (hi, lo) f64 with hi + lo exact: 64-bit integers in two parts."""
    a = np.asarray(a)
    if dtype_of(type_).kind == "f" or a.itemsize < 8:
        return a.astype(np.float64), 0.0
    high = (a >> 32).astype(np.float64) * 2.0**32  # arithmetic shift for s64
    return two_sum(high, (a & 0xFFFFFFFF).astype(np.float64))


def tf32_bits(a, rounding: str | None, satfinite: bool) -> np.ndarray:
    """``cvt.{rna,rn,rz}{.satfinite}.tf32.f32``: an f32 with its low 13 bits rounded away
    (.rna: ties away from zero); NaN is the canonical 0x7FFFFFFF, .satfinite clamps an
    infinite result to the largest finite tf32. ``.rna`` is bit arithmetic on every input, NaNs
    included, as on an H200 (measured: 0x7F800001 becomes 0x7F800000)."""
    f = np.atleast_1d(np.asarray(a, np.float32))
    bits = f.view(np.uint32).astype(np.uint64)
    if rounding == "rna" and not satfinite:
        return ((bits + 0x1000) & np.uint64(0xFFFFE000)).astype(np.uint32)
    if rounding == "rn":
        bits = bits + 0xFFF + ((bits >> np.uint64(13)) & np.uint64(1))
    elif rounding != "rz":
        bits = bits + 0x1000
    out = np.where(np.isinf(f), f.view(np.uint32), bits & np.uint64(0xFFFFE000)).astype(np.uint32)
    if satfinite:
        infinite = (out & np.uint32(0x7FFFFFFF)) == 0x7F800000
        out = np.where(infinite, (out & np.uint32(0x80000000)) | np.uint32(0x7F7FE000), out)
    return np.where(np.isnan(f), np.uint32(0x7FFFFFFF), out)


# ----- bf16 -------------------------------------------------------------------------
# A bf16 is the top half of an f32. Its arithmetic is computed exactly in f64 (the product of
# two bf16 is exact there; TwoSum keeps the error of a sum) and rounded once, as the ISA's
# .rn asks: to nearest, ties to even. A NaN result is the canonical 0x7FFF; min and max
# order -0 below +0 and ignore a NaN operand (.NaN: return NaN).
BF16_NAN = 0x7FFF
BF16_ONE = 0x3F80


def bf16_values(bits) -> np.ndarray:
    """The f32 values of bf16 bits (the low 16 bits of each integer)."""
    low = np.atleast_1d(np.asarray(bits)).astype(np.uint32) & np.uint32(0xFFFF)
    return (low << np.uint32(16)).view(np.float32)


def bf16_bits(hi, lo=0.0, rounding: str = "rn", relu: bool = False) -> np.ndarray:
    """The bf16 (uint32, low 16 bits) of the exact value ``hi + lo`` (f64, ``lo`` at most
    half an ulp of ``hi``), rounded to nearest even (rn), toward zero (rz), down (rm) or up
    (rp); ``relu``: negatives become +0. First to f32 rounded to odd (truncated, with its
    last bit set if anything was lost), which keeps what a second rounding needs: the
    bf16 is rounded once from the exact value, never twice."""
    hi = np.atleast_1d(np.asarray(hi, np.float64))
    if relu:  # negatives and -0 become +0 (measured)
        negative = np.signbit(hi) & ~np.isnan(hi)
        hi, lo = np.where(negative, 0.0, hi), np.where(negative, 0.0, lo)
    f = hi.astype(np.float32)
    rest = (hi - f) + lo
    inexact = (rest != 0) & np.isfinite(hi)
    overshot = inexact & (np.signbit(rest) != np.signbit(f))
    bits = (f.view(np.uint32).astype(np.uint64) - overshot) | inexact
    top, low = bits >> np.uint64(16), bits & np.uint64(0xFFFF)
    negative = (bits >> np.uint64(31)).astype(bool)
    if rounding == "rn":
        up = (low > 0x8000) | ((low == 0x8000) & (top & np.uint64(1)).astype(bool))
    elif rounding in ("rm", "rp"):
        up = (low != 0) & (negative if rounding == "rm" else ~negative)
    else:
        up = np.zeros(top.shape, bool)
    return np.where(np.isnan(hi), np.uint64(BF16_NAN), top + up).astype(np.uint32)


def _ordered(a, b, smaller: bool):
    """min (``smaller``) or max of a and b: -0 below +0, a NaN operand ignored."""
    beats = (a < b) if smaller else (a > b)
    tie = (a == b) & (np.signbit(a) == smaller)
    return np.where(beats | tie | np.isnan(b), a, b)


# bf16 opcode -> the exact result (hi, lo) of one half's f64 values (and "set" compares)
BF16_OPS = {
    "add": two_sum,
    "sub": lambda a, b: two_sum(a, -b),
    "mul": lambda a, b: (a * b, 0.0),  # 8-bit significands: exact in f64
    "fma": lambda a, b, c: two_sum(a * b, c),
    "min": lambda a, b: (_ordered(a, b, True), 0.0),
    "max": lambda a, b: (_ordered(a, b, False), 0.0),
    "neg": lambda a: (-a, 0.0),
    "abs": lambda a: (np.abs(a), 0.0),
}


def _bf16_result(ins: Instr):
    """``f(values of one half of each source) -> result bits of that half``."""
    if ins.op == "set":
        if any(m in BOOL_OPS for m in ins.mods):
            raise Unsupported("set.bf16 with a predicate operand")
        compare = compare_fn(ins)
        dst = ins.types[0]
        true = BF16_ONE if dst.startswith("bf16") else 0xFFFF if ins.type == "bf16x2" else 0xFFFFFFFF
        return lambda a, b: np.where(compare(a, b), np.uint32(true), np.uint32(0))
    unknown = set(ins.mods) - set(ins.types) - {"rn", "relu", "NaN"}
    if unknown:  # .xorsign.abs, .oob, .sat: not emulated
        raise Unsupported(f"{ins.op}.{min(unknown)} on bf16")
    exact = BF16_OPS[ins.op]
    relu = "relu" in ins.mods
    if "NaN" in ins.mods:  # min.NaN / max.NaN: a NaN operand makes the result NaN
        return lambda a, b: bf16_bits(np.where(np.isnan(a) | np.isnan(b), np.nan, exact(a, b)[0]))
    return lambda *values: bf16_bits(*exact(*values), relu=relu)


def build_bf16(ins: Instr, ch) -> Executor:
    """bf16 and bf16x2 arithmetic (each half of a bf16x2 on its own) and ``set``."""
    pairs = ins.type == "bf16x2"
    width = np.dtype(np.uint32 if pairs else np.uint16)
    result = _bf16_result(ins)
    gets = [ch.src(o, width) for o in ins.operands[1:]]
    out_type = dtype_of(ins.types[0]) if ins.op == "set" else width
    put = ch.registers.dst(ins.operands[0], out_type)
    shifts = (0, 16) if pairs else (0,)

    def run(idx):
        words = [np.asarray(get(idx)).astype(np.uint32) for get in gets]
        out = np.uint32(0)
        for shift in shifts:
            values = [bf16_values(w >> np.uint32(shift)).astype(np.float64) for w in words]
            out = out | (result(*values) << np.uint32(shift))
        put(idx, out.astype(out_type))

    return run


def build_math(fn, exact=None):
    """Approximate math (rcp, sqrt, rsqrt, ex2, lg2, sin, cos, tanh): computed exactly in the
    instruction's precision, which is within the hardware's stated error bounds (the
    conformance suite measures how far an H200's answers are). ``.ftz`` flushes subnormal
    operands and results; ``exact``: the correctly rounded form (``rcp.rz``, ``sqrt.rn``, ...)."""

    def build(ins, ch):
        if exact is not None and modified_float(ins):
            return build_rounded(ins, ch, exact)
        if "ftz" in ins.mods:
            return lanewise(ins, ch, lambda a: rounding.flush(fn(rounding.flush(a))))
        return lanewise(ins, ch, fn)

    return build


def build_unknown_branch(ins, ch):
    """``brx.idx`` (a jump through a table) and a ``bra`` to no label of the kernel: refused
    when they first run rather than jumping anywhere."""
    if ins.op == "brx":
        raise Unsupported("indirect branches are not emulated")
    raise Unsupported(f"its target {ins.text.split()[-1]} is not a label of the kernel")


def build_nop(ins, ch):
    return lambda idx: None


def build_testp(ins, ch):
    kind = next(
        m for m in ins.mods if m in ("finite", "infinite", "number", "notanumber", "normal", "subnormal")
    )
    tests = {
        "finite": np.isfinite,
        "infinite": np.isinf,
        "number": lambda a: ~np.isnan(a),
        "notanumber": np.isnan,
        # an H200 calls zero normal (measured): finite and not subnormal
        "normal": lambda a: np.isfinite(a) & ~((a != 0) & (np.abs(a) < np.finfo(a.dtype).tiny)),
        "subnormal": lambda a: (a != 0) & (np.abs(a) < np.finfo(a.dtype).tiny),
    }
    return lanewise(ins, ch, tests[kind], src_type=ins.type, dst_type="pred")


def build_copysign(ins, ch):
    return lanewise(ins, ch, lambda a, b: np.copysign(b, a))


OPS = {
    "add": build_add,
    "sub": build_sub,
    "mul": build_mul,
    "mad": build_mad,
    "fma": build_fma,
    "div": build_div,
    "rem": build_rem,
    "min": build_min,
    "max": build_max,
    "abs": build_abs,
    "neg": build_neg,
    "not": build_not,
    "cnot": build_cnot,
    "and": _logic(np.bitwise_and, np.logical_and),
    "or": _logic(np.bitwise_or, np.logical_or),
    "xor": _logic(np.bitwise_xor, np.logical_xor),
    "shl": build_shl,
    "shr": build_shr,
    "popc": build_popc,
    "clz": build_clz,
    "brev": build_brev,
    "bfe": build_bfe,
    "shf": build_shf,
    "bfind": build_bfind,
    "sad": build_sad,
    "bfi": build_bfi,
    "prmt": build_prmt,
    "setp": build_setp,
    "set": build_set,
    "selp": build_selp,
    "mov": build_mov,
    "cvt": build_cvt,
    "cvta": build_cvta,
    "isspacep": build_isspacep,
    "testp": build_testp,
    "copysign": build_copysign,
    "rcp": build_math(
        lambda a: (1 / a).astype(a.dtype), lambda a, dt, mode: rounding.divide(np.ones_like(a), a, dt)
    ),
    "sqrt": build_math(np.sqrt, rounding.square_root),
    "rsqrt": build_math(lambda a: (1 / np.sqrt(a)).astype(a.dtype)),
    "ex2": build_math(np.exp2),
    "lg2": build_math(np.log2),
    "sin": build_math(np.sin),
    "cos": build_math(np.cos),
    "tanh": build_math(np.tanh),
    "ld": access.build_ld,
    "ldu": access.build_ld,
    "st": access.build_st,
    "atom": access.build_atom,
    "red": access.build_atom,
    "shfl": collective.build_shfl,
    "vote": collective.build_vote,
    "activemask": collective.build_activemask,
    "redux": collective.build_redux,
    "match": collective.build_match,
    "bar": collective.build_bar_warp,
    "barrier": collective.build_bar_warp,
    "call": collective.build_call,
    "wmma": wmma.build_wmma,
    "mma": mma.build_mma,
    "ldmatrix": mma.build_ldmatrix,
    "stmatrix": mma.build_stmatrix,
    "cp": access.build_cp_async,
    "membar": build_nop,
    "fence": build_nop,
    "prefetch": build_nop,
    "prefetchu": build_nop,
    "nanosleep": build_nop,
    "pmevent": build_nop,
    "trap": aborts.build_trap,
    "bra": build_unknown_branch,
    "brx": build_unknown_branch,
}
PURE_OPS = frozenset(OPS) - {
    "ld",
    "ldu",
    "st",
    "atom",
    "red",
    "shfl",
    "vote",
    "activemask",
    "redux",
    "match",
    "bar",
    "barrier",
    "call",
    "wmma",
    "mma",
    "ldmatrix",
    "stmatrix",
    "cp",
    "trap",
    "bra",
    "brx",
}
