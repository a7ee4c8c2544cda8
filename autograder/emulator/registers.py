"""A chunk's registers: every register of the kernel for every lane, and the immediates its
instructions name.

One zeroed table per storage type (``storage_dtype``: predicates as bools, f32 and f64 as
floats, the other types as unsigned integers of their width), a row per register, so that a
chunk allocates a few arrays rather than one per register, and a run of fmas can read and
write rows of one table at once (``ops.fma_runs``). An instruction reads a register as any type
of its width through a view made once (``view``), and of another width through a conversion
(PTX lets integers truncate or extend). Nothing here is a launch's: a chunk kept for the next
launch of its shape keeps its registers, zeroed (``zero``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator.isa import DTYPES, Imm, Operand, Reg, dtype_of, immediate_bits
from autograder.emulator.ptx import Kernel

STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

Getter = Callable[[np.ndarray | None], object]  # lanes (None: every lane) -> their values
Putter = Callable[[np.ndarray | None, object], None]  # lanes, values -> None


def _storage(reg_type: str) -> np.dtype:
    if reg_type == "pred":
        return np.dtype(np.bool_)
    if reg_type in ("f32", "f64"):
        return dtype_of(reg_type)
    return np.dtype(STORAGE[dtype_of(reg_type).itemsize])


_STORAGE_OF = {name: _storage(name) for name in DTYPES}


def storage_dtype(reg_type: str) -> np.dtype:
    return _STORAGE_OF[reg_type]


@dataclass(frozen=True)
class RegisterLayout:
    """A kernel's registers (and the parameters of the calls it inlined): their names by storage
    type (``types``), and per name its type's place there and its row (``slots``). Worked out
    once per kernel (a kernel of a few thousand registers took a chunk 3 ms to index)."""

    types: tuple[tuple[np.dtype, tuple[str, ...]], ...]
    slots: dict[str, tuple[int, int]]


def register_types(kernel: Kernel) -> RegisterLayout:
    """The kernel's registers (and the parameters of the calls it inlined) by storage type."""
    types = {name: storage_dtype(t) for name, t in kernel.registers.items()}
    types.update(dict.fromkeys(kernel.call_params, np.dtype(np.uint64)))
    by_type: dict[np.dtype, list[str]] = {}
    for name, dt in types.items():
        by_type.setdefault(dt, []).append(name)
    slots = {name: (t, k) for t, names in enumerate(by_type.values()) for k, name in enumerate(names)}
    return RegisterLayout(tuple((dt, tuple(names)) for dt, names in by_type.items()), slots)


class RegisterFile:
    """Every register of ``n`` lanes (``layout``: where each lies, ``register_types``): a zeroed
    table per storage type (``tables``); ``row(name)``: a register's table and its row there;
    ``regs``: per name, that row, as an executor first asks for it."""

    def __init__(self, layout: RegisterLayout, n: int):
        self.n = n
        self.slots = layout.slots
        self.tables = [np.zeros((len(names), n), dt) for dt, names in layout.types]  # one a type
        self.regs: dict[str, np.ndarray] = {}
        self._views: dict[tuple, np.ndarray] = {}
        self._typed: dict[tuple, np.ndarray] = {}
        self._immediates: dict[tuple, np.generic] = {}  # by (operand, dtype)
        self._scratch: dict[tuple, np.ndarray] = {}

    def zero(self) -> None:
        """Every register 0, as a new chunk's."""
        for table in self.tables:
            table.fill(0)

    def clear(self) -> None:
        """Drop every array (the executors' closures may outlive the chunk)."""
        for held in (self.regs, self._views, self._typed, self._immediates, self._scratch):
            held.clear()
        self.tables.clear()

    def row(self, name: str) -> tuple[np.ndarray, int]:
        """Register ``name``'s table and its row there (KeyError: no such register)."""
        t, k = self.slots[name]
        return self.tables[t], k

    def reg(self, name: str) -> np.ndarray:
        found = self.regs.get(name)
        if found is None:
            try:
                table, k = self.row(name)
            except KeyError:
                raise Unsupported(f"register {name} is not declared") from None
            found = self.regs[name] = table[k]
        return found

    def view(self, operand: Operand | None, dtype) -> np.ndarray | None:
        """The register itself, seen as ``dtype``, when that is a plain reinterpretation."""
        if type(operand) is not Reg or operand.negate:
            return None
        key = (operand.name, dtype)
        view = self._views.get(key)
        if view is None:
            place = self.slots.get(operand.name)
            if place is None:
                raise Unsupported(f"register {operand.name} is not declared")
            t, k = place
            if self.tables[t].dtype.itemsize != np.dtype(dtype).itemsize:
                return None
            typed = self._typed.get((t, dtype))  # a table seen as dtype: a view of its rows each
            if typed is None:
                typed = self._typed[(t, dtype)] = self.tables[t].view(dtype)
            view = self._views[key] = typed[k]
        return view

    def consecutive(self, operands: Sequence[Operand | None], dtype) -> np.ndarray | None:
        """Registers ``operands`` as one (len, lanes) view of ``dtype``, where they are
        consecutive rows of one table (a vector load's destinations, mostly); else None."""
        slots = self.slots
        places = [slots.get(o.name) if type(o) is Reg and not o.negate else None for o in operands]
        if None in places:
            return None
        t, first = places[0]  # type: ignore[misc]
        if places != [(t, first + j) for j in range(len(places))]:
            return None
        table = self.tables[t]
        if table.dtype.itemsize != np.dtype(dtype).itemsize:
            return None
        return table[first : first + len(places)].view(dtype)

    def scratch(self, dtype, rows: int = 0, slot: int = 0) -> np.ndarray:
        """A temporary register of ``dtype`` that executors share, or ``rows`` of them (a run
        of fmas'; ``slot`` tells apart those one executor needs at once): valid only while one
        runs."""
        key = (np.dtype(dtype), rows, slot)
        array = self._scratch.get(key)
        if array is None:
            array = self._scratch[key] = np.empty((rows, self.n) if rows else self.n, dtype)
        return array

    def immediate(self, operand: Imm, dtype) -> np.generic:
        """An immediate operand as a numpy scalar of ``dtype``, converted once per chunk."""
        key = (operand, dtype)
        value = self._immediates.get(key)
        if value is None:
            value = self._immediates[key] = _immediate(operand.text, np.dtype(dtype))
        return value

    def getter(self, operand: Reg, dtype) -> Getter:
        """``get(idx)`` of a register that is no plain view of ``dtype`` (``view``): negated (a
        predicate), or of another width."""
        storage = self.reg(operand.name)
        if operand.negate:
            return lambda idx: ~storage if idx is None else ~storage[idx]
        return _converting_getter(storage, np.dtype(dtype))

    def dst(self, operand: Operand | None, dtype) -> Putter:
        """``put(idx, values)``: write lanes ``idx`` (None: every lane) of a register."""
        if operand is None:
            return lambda idx, value: None
        if not isinstance(operand, Reg):
            raise Unsupported(f"cannot write to {operand}")
        view = self.view(operand, dtype)
        if view is None:
            storage = self.reg(operand.name)
            dt = np.dtype(dtype)
            signed = dt.kind == "i"
            kind = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}[storage.itemsize]
            view = storage.view(kind if signed else storage.dtype) if storage.dtype.kind != "f" else storage

        def put(idx: np.ndarray | None, value) -> None:
            if idx is None:
                np.copyto(view, value, casting="unsafe")
            else:
                view[idx] = value

        return put

    def guard(self, guard: Reg | None) -> Callable[[], np.ndarray] | None:
        """``() -> bools``: the lanes that pass an instruction's guard (None: no guard)."""
        if guard is None:
            return None
        storage = self.reg(guard.name)
        return (lambda: ~storage) if guard.negate else (lambda: storage)


@functools.lru_cache(maxsize=4096)
def _immediate(text: str, dtype: np.dtype) -> np.generic:
    """An immediate operand as a numpy scalar of ``dtype``, the same in every launch."""
    return as_scalar(immediate_bits(text, ""), dtype)


def as_scalar(value: int | float, dtype: np.dtype) -> np.generic:
    """``value`` (an immediate's bits, or a symbol's address) as a numpy scalar of ``dtype``."""
    if dtype.kind == "f":
        return dtype.type(value)
    if dtype.kind == "b":
        return np.bool_(value)
    bits = 8 * dtype.itemsize
    return np.array(int(value) & ((1 << bits) - 1), STORAGE[dtype.itemsize]).view(dtype)[()]


def _converting_getter(storage: np.ndarray, dtype: np.dtype) -> Getter:
    """Read a register of another width: integers truncate or extend, as PTX allows."""

    def get(idx: np.ndarray | None) -> np.ndarray:
        values = storage if idx is None else storage[idx]
        return values.astype(dtype)

    return get
