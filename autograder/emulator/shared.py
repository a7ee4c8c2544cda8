"""Executors a kernel's small chunks share: built once per kernel, not per chunk shape.

Most of a grading's launches are the first of their kernel at their shape, and building
executors against the chunk's registers was half of what such a launch did beyond a repeat's
work. The every-lane path of a register-only instruction (``ops.every_lane``: adds, setps,
fmas, ...) needs the chunk's registers only when it runs, so it is built here once per kernel
and reads them through the kernel's ``Views`` when it runs: the views of the chunk ``Views`` is
bound to (``Chunk.bind``; a chunk released and not kept for the next launch of its shape
is unbound, ``Views.unbind``). Its path for some lanes alone
(``ops.lanewise`` and the like) holds the chunk's arrays, so it is built for the chunk bound,
the first time some lanes run alone, and dropped when the chunk is released. A load or store
through a register's address (``access.build_ld``, ``build_st``) works out its operands' views
once per kernel; its ``Access`` holds the chunk (memory, counters and findings are its
launch's), so its every-lane executor is made for the chunk bound from those views, and its
path for some lanes is built per chunk as before. ``wmma.mma`` reads its fragments' registers
through the views and the chunk bound when it runs, for every lane and some warps alike.

Each shared path here is the one ``ops.build_executor`` would build for the instruction (the
same conditions, the same numpy calls on the same registers), so what a launch computes and
reports is unchanged (``bench/emulator_digest.py``); an instruction without one is built per
chunk as before (``plan.Plan``). One chunk of a kernel runs at a time (a process runs one
launch at a time, its chunks one after another), so one binding serves. Only chunks of a few
thousand lanes share (``ops.FUSED_LANES``): a larger chunk's time is numpy's, not building
executors."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from operator import itemgetter

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator import access, ops, rounding, wmma
from autograder.emulator.access import Access
from autograder.emulator.isa import PURE, Addr, Executor, Imm, Instr, Reg, Vec, dtype_of
from autograder.emulator.registers import RegisterLayout

Key = tuple  # ("view", table, row, dtype), ("rows", table, first, count, dtype), ("imm", operand, dtype)
# or ("scratch", dtype, rows, slot)
SlowBuilder = Callable[[object], Executor]  # chunk -> the executor of some lanes alone
ERRORS = (Unsupported, KeyError, IndexError, ValueError, TypeError, AttributeError)  # build_executor's


class Views:
    """The register views shared executors read (``arrays[slot(key)]``), of the chunk bound
    (``bind``), and their paths for some lanes built for it (``slow``)."""

    def __init__(self, layout: RegisterLayout):
        self.layout = layout
        self.keys: list[Key] = []
        self.slots: dict[Key, int] = {}
        self.arrays: list = []
        self.slow: dict[object, Executor] = {}
        self.chunk = None
        self.typed: dict[tuple, np.ndarray] = {}  # the chunk bound's tables seen as a type (_resolve)
        self.view_keys: dict[tuple, Key | None] = {}  # view's keys by register name and dtype

    def bind(self, chunk) -> None:
        """Shared executors read ``chunk``'s registers from now on (still bound to it: a chunk
        kept for the next launch of its shape, ``chunk.Chunk.release``)."""
        if chunk is self.chunk:
            return
        self.chunk = chunk
        self.slow.clear()
        self.typed = {}
        self.arrays[:] = _resolve_all(self.keys, chunk.registers, self.typed)

    def unbind(self) -> None:
        """Hold nothing of the chunk (its arrays, the paths built for it)."""
        self.chunk = None
        self.slow.clear()
        self.typed = {}
        self.arrays[:] = []

    def slot(self, key: Key) -> int:
        found = self.slots.get(key)
        if found is None:
            self.arrays.append(_resolve(key, self.chunk.registers, self.typed))  # type: ignore[attr-defined]
            found = self.slots[key] = len(self.keys)
            self.keys.append(key)
        return found

    def view(self, operand, dtype) -> Key | None:
        """The key of ``registers.RegisterFile.view(operand, dtype)``: None where it is None;
        worked out once per register and dtype (``view_key``: a kernel's executors name each
        register many times)."""
        if type(operand) is not Reg or operand.negate:
            return None
        memo = (operand.name, dtype)
        if memo in self.view_keys:
            return self.view_keys[memo]
        key = self.view_keys[memo] = self.view_key(operand, dtype)
        return key

    def view_key(self, operand: Reg, dtype) -> Key | None:
        """``view``'s key of a register, not negated, worked out."""
        place = self.layout.slots.get(operand.name)
        if place is None:
            raise Unsupported(f"register {operand.name} is not declared")
        table, row = place
        if self.layout.types[table][0].itemsize != np.dtype(dtype).itemsize:
            return None
        return ("view", table, row, np.dtype(dtype))

    def storage(self, operand: Reg) -> Key:
        """The key of ``registers.RegisterFile.reg(operand.name)``: the register as stored."""
        place = self.layout.slots.get(operand.name)
        if place is None:
            raise Unsupported(f"register {operand.name} is not declared")
        table, row = place
        return ("view", table, row, np.dtype(self.layout.types[table][0]))

    def rows(self, operands, dtype) -> Key | None:
        """The key of ``registers.RegisterFile.consecutive(operands, dtype)``: None where it is None."""
        places = [
            self.layout.slots.get(o.name) if type(o) is Reg and not o.negate else None for o in operands
        ]
        if None in places:
            return None
        table, first = places[0]  # type: ignore[misc]
        if places != [(table, first + j) for j in range(len(places))]:
            return None
        if self.layout.types[table][0].itemsize != np.dtype(dtype).itemsize:
            return None
        return ("rows", table, first, len(places), np.dtype(dtype))

    def full(self, operand, dtype) -> Key | None:
        """The key of ``chunk.Chunk.full(operand, dtype)`` for a register or an immediate; None
        for any other operand (a launch's value: built per chunk)."""
        if type(operand) is Imm:
            return ("imm", operand, np.dtype(dtype))
        return self.view(operand, dtype)


def _resolve_all(keys: list[Key], registers, typed: dict[tuple, np.ndarray]) -> list:
    """The arrays ``keys`` name in ``registers``, each table seen as a type once (a tensor-core
    kernel's shared executors read 2 700 registers: resolved one by one, 12 ms a launch; ``typed``:
    the tables seen so far, kept for ``Views.slot`` while the chunk is bound)."""
    return [_resolve(key, registers, typed) for key in keys]


def _resolve(key: Key, registers, typed: dict[tuple, np.ndarray]):
    """A register's row of its table seen as the key's type (``RegisterFile.view``; ``typed``:
    the tables seen so far), an immediate, or a scratch register."""
    if key[0] == "view":
        _, table, row, dtype = key
        rows = typed.get((table, dtype))
        if rows is None:
            rows = typed[(table, dtype)] = registers.tables[table].view(dtype)
        return rows[row]
    if key[0] == "rows":
        _, table, first, count, dtype = key
        return registers.tables[table][first : first + count].view(dtype)
    if key[0] == "imm":
        return registers.immediate(key[1], key[2])
    return registers.scratch(*key[1:])


class Shared:
    """A kernel's shared executors (``executor(k)``, None where instruction ``k`` has none),
    built the first time a small chunk reaches them, and the ``views`` they read."""

    def __init__(self, program: list[Instr], kinds: list[int], portable: list[bool], layout: RegisterLayout):
        self.program, self.kinds, self.portable = program, kinds, portable
        self.views = Views(layout)
        self.executors: dict[int, Executor | None] = {}

    def executor(self, k: int) -> Executor | None:
        if k in self.executors:
            return self.executors[k]
        ins = self.program[k]
        # wmma's recipe takes its mma alone, which reads nothing but its fragments' registers
        shareable = ins.op == "wmma" or (self.portable[k] and (self.kinds[k] == PURE or ins.op in ACCESSES))
        made = _build(ins, self.views) if shareable else None
        self.executors[k] = made
        return made


def _build(ins: Instr, views: Views) -> Executor | None:
    """The shared executor of ``ins``, where ``ops.build_executor`` builds an every-lane path
    for it; else None."""
    builder = ops.OPS.get(ins.op)
    recipe = RECIPES.get(ins.op)
    if builder is None or recipe is None:
        return None
    try:
        if ops._packed_types(ins, builder) is not builder:  # f16x2, bf16: their own builders
            return None
        return recipe(ins, views)
    except ERRORS:  # ops.build_executor's unsupported executor, built per chunk
        return None


def _every_lane(views: Views, keys: list[Key | None], fast: Callable, build_slow: SlowBuilder):
    """``ops.every_lane`` over ``views``: ``fast(*arrays of keys)`` when every lane runs, else
    ``build_slow(chunk)``'s executor, built for the chunk bound the first time some lanes run
    alone. None where a key is (``ops.build_executor`` builds no every-lane path then)."""
    if None in keys:
        return None
    get = itemgetter(*[views.slot(key) for key in keys])  # type: ignore[arg-type]
    arrays, slows = views.arrays, views.slow

    def run(idx) -> None:
        if idx is None:
            fast(*get(arrays))
            return
        slow = slows.get(run)
        if slow is None:
            slow = slows[run] = build_slow(views.chunk)
        slow(idx)

    return run


def _per_chunk(views: Views, keys: list[Key | None], make: Callable, build_slow: SlowBuilder):
    """``_every_lane`` for an executor that holds its chunk (a load's or store's ``Access``):
    when every lane runs, ``make(chunk, *arrays of keys)``'s executor, made for the chunk bound
    the first time, else ``build_slow(chunk)``'s. None where a key is."""
    if None in keys:
        return None
    slots = [views.slot(key) for key in keys]  # type: ignore[arg-type]
    made = views.slow

    def run(idx) -> None:
        which = make if idx is None else run
        executor = made.get(which)
        if executor is None:
            chunk = views.chunk
            if idx is None:
                executor = made[which] = make(chunk, *[views.arrays[slot] for slot in slots])
            else:
                executor = made[which] = build_slow(chunk)
        executor(idx)

    return run


# ----- the every-lane paths of ops.py, each under the conditions its builder takes it ---------
def _ufunc(ufunc) -> Callable[[Instr, Views], Executor | None]:
    """``ops.ufunc_op``."""

    def build(ins: Instr, views: Views):
        dt = dtype_of(ins.type)
        d = views.view(ins.operands[0], dt)
        a, b = (views.full(o, dt) for o in ins.operands[1:3])
        fast = partial(ops._in_place_f32, ufunc) if dt == np.float32 else _out(ufunc)
        return _every_lane(views, [a, b, d], fast, lambda ch: ops.lanewise(ins, ch, ufunc))

    return build


def _out(ufunc):
    return lambda a, b, d: ufunc(a, b, out=d)


def _add(ufunc):
    """``ops.build_add``, ``ops.build_sub``."""
    plain = _ufunc(ufunc)
    return lambda ins, views: None if ops.modified_float(ins) or "sat" in ins.mods else plain(ins, views)


def _logic(int_fn, bool_fn):
    """``ops._logic``."""
    return lambda ins, views: _ufunc(bool_fn if ins.type == "pred" else int_fn)(ins, views)


def _shift(ufunc):
    """``ops.build_shl``, ``ops.build_shr``: a shift by an immediate under the width is the ufunc."""

    def build(ins: Instr, views: Views):
        small = ops._small_imm(ins, 8 * dtype_of(ins.type).itemsize)
        return _ufunc(ufunc)(ins, views) if small else None

    return build


def _mul(ins: Instr, views: Views):
    """``ops.build_mul``."""
    dt = dtype_of(ins.type)
    if dt.kind == "f":
        return None if ops.modified_float(ins) else _ufunc(np.multiply)(ins, views)
    if "wide" in ins.mods:
        wide = dtype_of(ops.WIDE[ins.type])
        d = views.view(ins.operands[0], wide)
        a, b = (views.full(o, dt) for o in ins.operands[1:3])

        def slow(ch):
            return ops.lanewise(
                ins, ch, lambda a, b: a.astype(wide) * b.astype(wide), ins.type, ops.WIDE[ins.type]
            )

        return _every_lane(views, [a, b, d], lambda a, b, d: np.multiply(a, b, out=d, dtype=wide), slow)
    if "hi" in ins.mods:
        return None
    return _ufunc(np.multiply)(ins, views)


def _mad(ins: Instr, views: Views):
    """``ops.build_mad``."""
    dt = dtype_of(ins.type)
    if dt.kind == "f":
        return _fma(ins, views)
    if "wide" in ins.mods or "hi" in ins.mods:
        return None
    d = views.view(ins.operands[0], dt)
    a, b, c = (views.full(o, dt) for o in ins.operands[1:4])

    def fast(a, b, c, d, product):
        np.multiply(a, b, out=product)
        np.add(product, c, out=d)

    product = ("scratch", np.dtype(dt), 0, 0)
    return _every_lane(views, [a, b, c, d, product], fast, lambda ch: ops.lanewise(ins, ch, ops._mad))


def _fma(ins: Instr, views: Views):
    """``ops.build_fma``'s f32 path."""
    dt = dtype_of(ins.type)
    if dt != np.float32 or ops.modified_float(ins):
        return None
    d = views.view(ins.operands[0], dt)
    a, b, c = (views.full(o, dt) for o in ins.operands[1:4])

    def fast(a, b, c, d, product, total):
        np.multiply(a, b, out=product, dtype=np.float64)
        np.add(product, c, out=total)
        rounding.settle(d, total, product, c)  # rounded once from the exact sum

    f64 = np.dtype(np.float64)
    scratch = [("scratch", f64, 0, 0), ("scratch", f64, 0, 1)]
    return _every_lane(views, [a, b, c, d, *scratch], fast, lambda ch: ops.lanewise(ins, ch, ops._fma_f32))


def _setp(ins: Instr, views: Views):
    """``ops.build_setp``'s every-lane path: one destination, no predicate combined."""
    fn = ops.compare_fn(ins)
    dt = dtype_of(ins.type)
    dsts = ins.operands[0].items if isinstance(ins.operands[0], Vec) else (ins.operands[0],)
    combine = next((ops.BOOL_OPS[m] for m in ins.mods if m in ops.BOOL_OPS), None)
    if len(dsts) != 1 or combine is not None or not isinstance(fn, np.ufunc) or ins.type == "bf16":
        return None
    d = views.view(dsts[0], np.bool_)
    a, b = (views.full(o, dt) for o in ins.operands[1:3])
    return _every_lane(views, [a, b, d], _out(fn), lambda ch: ops._setp(ins, ch, fn, dt, dsts, combine))


def _mov(ins: Instr, views: Views):
    """``ops.build_mov`` of a register or an immediate into a register of its width: its
    ``put(None, get(None))`` is this copy."""
    dt = dtype_of(ins.type)
    dst, src = ins.operands[0], ins.operands[1]
    if isinstance(dst, Vec) or isinstance(src, Vec):
        return None
    d = views.view(dst, dt)
    a = views.full(src, dt)
    return _every_lane(views, [a, d], _copy, lambda ch: ops.build_mov(ins, ch))


def _copy(a, d) -> None:
    np.copyto(d, a, casting="unsafe")


# ----- loads and stores through a register's address (access.py), their Access made per chunk --
def _ld(ins: Instr, views: Views):
    """``access.build_ld`` of a load (not ``ld.param``) into registers of its width, its address
    a register's."""
    space = access.space_of(ins)
    if space == "param":
        return None
    dt = dtype_of(ins.type)
    dsts = access.destinations(ins)
    addr = ins.operands[1]
    if not isinstance(addr, Addr) or type(addr.base) is not Reg:  # a symbol's address: per chunk
        return None
    block = views.rows(dsts, dt) if isinstance(ins.operands[0], Vec) else None
    keys = [views.storage(addr.base), *(views.view(d, dt) for d in dsts)]

    def make(chunk, base, *registers):
        direct = list(registers[: len(dsts)])
        puts = [partial(_put, d) for d in direct]
        at = _addresses(base, addr.offset)
        return access.load_executor(
            Access(ins, chunk, space), at, puts, direct, registers[-1] if block else None
        )

    slow = partial(access.build_ld, ins)
    return _per_chunk(views, [*keys, block] if block else keys, make, slow)


def _st(ins: Instr, views: Views):
    """``access.build_st`` of a store (not ``st.param``) of registers of its width or
    immediates, its address a register's."""
    space = access.space_of(ins)
    if space == "param":
        return None
    dt = dtype_of(ins.type)
    addr = ins.operands[0]
    if not isinstance(addr, Addr) or type(addr.base) is not Reg:  # a symbol's address: per chunk
        return None
    keys = [views.storage(addr.base), *(views.full(v, dt) for v in access.stored(ins))]

    def make(chunk, base, *values):
        gets = [partial(_every, v) for v in values]
        return access.store_executor(Access(ins, chunk, space), _addresses(base, addr.offset), gets)

    return _per_chunk(views, keys, make, partial(access.build_st, ins))


def _put(register: np.ndarray, idx, value) -> None:
    """``RegisterFile.dst``'s ``put`` of every lane (``idx`` None) into a register's view."""
    np.copyto(register, value, casting="unsafe")


def _every(value, idx):
    """``chunk.Chunk.src``'s ``get`` of every lane (``idx`` None): the register or immediate."""
    return value


def _addresses(storage: np.ndarray, offset: int) -> Callable:
    """``chunk.Chunk.address`` of every lane, through a register (``storage``: as stored)."""
    if storage.itemsize != 8:
        return lambda idx: storage.astype(np.int64) + offset
    base: np.ndarray = storage.view(np.int64)
    if offset == 0:
        return lambda idx: base
    return lambda idx: base + offset


# ----- wmma.mma: every lane and some warps alike, its fragments read from the views ---------------
def _wmma(ins: Instr, views: Views):
    """``wmma.build_wmma``'s ``mma``: the chunk bound and its fragments' registers, when it runs."""
    if "m16n16k16" not in ins.mods or ins.mods[0] != "mma":
        return None
    d_type, c_type = ins.types[-2], ins.types[-1]
    halves = (wmma._halves(d_type), True, True, wmma._halves(c_type))  # d, a, b, c
    fragments = [_fragment(views, o, h) for o, h in zip(ins.operands[:4], halves, strict=True)]
    arrays = views.arrays

    def bound() -> tuple:
        return (views.chunk, *[fragment(arrays) for fragment in fragments])

    return wmma.mma_executor(ins, bound)


def _fragment(views: Views, operand, halves: bool) -> Callable[[list], wmma.Fragment]:
    """``wmma._regs`` through ``views``: the fragment's registers out of the views' arrays."""
    if not isinstance(operand, Vec):
        raise Unsupported("wmma fragment operand")
    block = views.rows(operand.items, np.uint32 if halves else np.float32)
    if block is not None:
        return itemgetter(views.slot(block))
    slots = [views.slot(views.storage(r)) for r in operand.items]
    return lambda arrays: [arrays[slot] for slot in slots]


RECIPES: dict[str, Callable[[Instr, Views], Executor | None]] = {
    "mov": _mov,
    "add": _add(np.add),
    "sub": _add(np.subtract),
    "and": _logic(np.bitwise_and, np.logical_and),
    "or": _logic(np.bitwise_or, np.logical_or),
    "xor": _logic(np.bitwise_xor, np.logical_xor),
    "shl": _shift(np.left_shift),
    "shr": _shift(np.right_shift),
    "mul": _mul,
    "mad": _mad,
    "fma": _fma,
    "setp": _setp,
    "ld": _ld,
    "st": _st,
    "wmma": _wmma,
}
ACCESSES = frozenset({"ld", "st"})  # not register-only: shared where portable (machine.portable)
