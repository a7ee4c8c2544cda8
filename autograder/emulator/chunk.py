"""A chunk: whole blocks of a launch as lanes (``lanes.Lanes``), bound to the launch that runs
them, and what an executor is built against.

A chunk holds its registers (``registers.RegisterFile``), its plan of executors (``plan.Plan``)
and, while the scheduler runs it (``scheduler.Scheduler``), its lanes' states; the launch's part
(``bind``) is its blocks in the grid, its shared and local memory (made when the launch first
reads them), the special registers and symbols its instructions read. Executors read operands
through ``src``/``full``/``address`` (registers, immediates, symbols, special registers) and
write them through ``registers.dst``.

A small chunk is kept when its launch ends (``release``, ``SHELL_BYTES``): the next launch of
the same kernel and shape runs in it (``acquire``), registers zeroed, with the executors that
hold nothing of a launch (``machine.portable``). A small chunk binds the executors its kernel
shares (``shared.Views``) to its registers when it starts a launch (``bind``)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from autograder.contract import Unsupported
from autograder.emulator.isa import CLOCK_REGISTERS, Addr, Imm, Operand, Reg, Sreg, Sym, immediate_bits
from autograder.emulator.lanes import Lanes
from autograder.emulator.memory import SharedMemory
from autograder.emulator.ops import FUSED_LANES
from autograder.emulator.plan import Plan
from autograder.emulator.registers import Getter, RegisterFile, as_scalar
from autograder.emulator.special import clock_getter
from autograder.emulator.special import read as read_special

CLOCKS = frozenset(Sreg(name) for name in CLOCK_REGISTERS)
# a chunk whose registers take at most this is kept for the next launch of its shape, one of a
# single block twice this (_shell_bytes); at 4 MB for every chunk the grading's peak memory went
# 254 -> 315 MB (the shells of every kernel's larger shapes, kept with their memos)
SHELL_BYTES = 2 << 20
SHELLS_PER_KERNEL = 2  # shapes kept per decoded kernel (machine.decoded_kernel keeps 32 kernels)

Value = np.ndarray | np.generic
Machine = Any  # machine.Machine, the launch: it imports this module, which cannot import it back


class Chunk(Lanes):
    """Whole blocks ``first .. first + n_blocks - 1`` of the grid, all threads as lanes (a chunk
    is its lanes: executors and barriers read them as its own attributes)."""

    # the lanes' states, made by the scheduler when it starts (barriers.py reads and releases them)
    status: np.ndarray  # per lane: RUN, WAIT or DONE
    pc: np.ndarray  # per lane: its next instruction (BIG once it waits or has exited)
    wait_pc: np.ndarray  # per waiting lane: the barrier it waits at
    exit_pc: np.ndarray  # per lane: the branch to the exit it took, or the exit

    def __init__(self, machine: Machine, first: int, n_blocks: int):
        super().__init__(n_blocks, machine.block)  # type: ignore[arg-type]
        decoded = machine.decoded
        self.registers = RegisterFile(decoded.registers, self.n)
        shared = decoded.shared if self.n <= FUSED_LANES else None  # Python's time, not numpy's
        self.plan = Plan(self, self.registers, decoded.program, decoded.kinds, decoded.fma_runs, shared)
        self.bind(machine, first)

    def bind(self, machine: Machine, first: int) -> None:
        """What is the launch's and this chunk's own: blocks ``first ..``, shared and local
        memory, special registers and symbols."""
        self.m = machine
        self.place(first, machine.grid)  # type: ignore[arg-type]
        self._forget_memory()  # made anew when this launch first reads it (shared, local)
        self._sregs: dict[str, Value] = {}
        self._launch_constants: dict[tuple, Value] = {}  # special registers, symbols
        self.steps = 0  # the scheduler's steps so far, as the last SIDE instruction saw them
        self.clock_start: np.ndarray | None = None  # per lane, for the clocks (special.py)
        if self.plan.shared:  # the kernel's shared executors read this chunk's registers
            self.plan.shared.views.bind(self)

    @classmethod
    def acquire(cls, machine: Machine, first: int, n_blocks: int) -> Chunk:
        """Blocks ``first .. first + n_blocks - 1``: in the chunk an earlier launch of the same
        kernel and shape left (``release``), its registers zeroed, with the executors that hold
        nothing of a launch (``portable``: building them is most of a small launch's cost), and
        those that read its blocks' special registers where they are the same blocks (``placed``);
        else in a new chunk."""
        shell = machine.decoded.shells.pop(_shape(machine, n_blocks), None)
        if shell is None:
            return cls(machine, first, n_blocks)
        shell.registers.zero()
        if shell.grid != machine.grid or shell.block_linear[0] != first:  # other blocks (machine.placed)
            shell.plan.keep(machine.decoded.portable)
        shell.bind(machine, first)
        return shell

    def release(self) -> None:
        """Keep a small chunk for the next launch of its shape (``acquire``) with its portable
        executors, the launch's state dropped; else drop the executors
        (closures over this chunk) so that its arrays are freed now."""
        m = self.m
        self._sregs.clear()
        self._launch_constants.clear()
        self.clock_start = None
        if self.n * m.decoded.register_bytes <= _shell_bytes(self.n_blocks) and not m.launch.cooperative:
            self.plan.keep(m.decoded.placed)
            del self.m
            self._forget_memory()
            shells = m.decoded.shells
            if len(shells) >= SHELLS_PER_KERNEL:  # the oldest shape goes
                shells.pop(next(iter(shells)))
            shells[_shape(m, self.n_blocks)] = self
            return
        if self.plan.shared:  # nothing of this chunk held once it is dropped
            self.plan.shared.views.unbind()
        self.plan.drop()
        self.registers.clear()
        self._forget_memory()

    @functools.cached_property
    def shared(self) -> SharedMemory:
        """The shared memory of the chunk's blocks, with its shadow: each launch's own, fresh
        (0xFF garbage, nothing written), made when the launch first reads it (``bind``): most
        small kernels never do."""
        return SharedMemory(self.m.layout, self.n_blocks, self.m.shadow_unit)

    @functools.cached_property
    def shared_base(self) -> np.ndarray:
        """Per lane: where its block's shared memory starts in ``shared``."""
        return self.lane_slot * self.shared.block_bytes

    @functools.cached_property
    def local(self) -> np.ndarray:
        """The lanes' local memory, each launch's own, fresh (0xFF garbage), made when first read."""
        return np.full(max(self.m.local_size, 16) * self.n, 0xFF, np.uint8)

    def _forget_memory(self) -> None:
        """Drop the shared and local memory a launch made (``shared``, ``local``): the next makes its own."""
        for name in ("shared", "shared_base", "local"):
            self.__dict__.pop(name, None)

    # ----- operands ----------------------------------------------------------------
    def full(self, operand: Operand, dtype) -> Value | None:
        """A value valid for the whole chunk (array or scalar), or None if it must be computed;
        constants and special registers are converted once per chunk and shared (read-only)."""
        kind = type(operand)
        if kind is Reg:
            return self.registers.view(operand, dtype)
        if kind is Imm:
            return self.registers.immediate(operand, dtype)  # type: ignore[arg-type]
        if kind is not Sym and kind is not Sreg:
            return None
        if kind is Sreg and operand in CLOCKS:  # a clock changes: read when it runs (src)
            return None
        key = (operand, dtype)
        value = self._launch_constants.get(key)
        if value is None:
            value = self._launch_constants[key] = self._constant(operand, dtype)  # type: ignore[arg-type]
        return value

    def _constant(self, operand: Sym | Sreg, dtype) -> Value:
        if type(operand) is Sym:
            return as_scalar(self.m.symbol_value(operand.name), np.dtype(dtype))
        value = self.sreg(operand.name)
        return value.astype(dtype) if isinstance(value, np.ndarray) else np.dtype(dtype).type(value)

    def src(self, operand: Operand, dtype) -> Getter:
        """``get(idx)``: the operand's values for lanes ``idx`` (None: every lane)."""
        full = self.full(operand, dtype)
        if isinstance(full, np.ndarray):
            return lambda idx: full if idx is None else full[idx]
        if full is not None:
            return lambda idx: full
        if isinstance(operand, Reg):
            return self.registers.getter(operand, dtype)
        if isinstance(operand, Sreg):  # a clock: read when the instruction runs
            get = clock_getter(operand.name, self)
            return lambda idx: np.asarray(get(idx)).astype(dtype)
        raise Unsupported(f"operand {operand} is not supported by the emulator")

    def address(self, addr: Addr) -> Getter:
        """``get(idx)`` of the int64 addresses an ``[base+offset]`` operand names."""
        if isinstance(addr.base, Reg):
            storage = self.registers.reg(addr.base.name)
            if storage.itemsize != 8:  # widened when it runs (a copy of every lane's made here went unused)
                return lambda idx: (storage if idx is None else storage[idx]).astype(np.int64) + addr.offset
            base: np.ndarray = storage.view(np.int64)
            off = addr.offset
            if off == 0:
                return lambda idx: base if idx is None else base[idx]
            return lambda idx: (base if idx is None else base[idx]) + off
        value = (
            self.m.symbol_value(addr.base.name)
            if isinstance(addr.base, Sym)
            else int(immediate_bits(addr.base.text, ""))
        ) + addr.offset
        n = self.n
        return lambda idx: np.full(n if idx is None else idx.size, value, np.int64)

    def sreg(self, name: str) -> Value:
        """Special register ``name`` for every lane (``special.read``), read once per launch."""
        if name not in self._sregs:
            try:
                self._sregs[name] = read_special(name, self)
            except KeyError:
                raise Unsupported(f"special register {name} is not supported by the emulator") from None
        return self._sregs[name]


def _shell_bytes(n_blocks: int) -> int:
    """The most registers a chunk of ``n_blocks`` kept for its shape's next launch may hold: a
    single block's chunk is the one a kernel's small cases all run in, and a block of the
    tensor-core GEMM holds 3.8 MB (rebuilt for each launch, its 22 launches in a grading took
    0.2 s more; kept, the grading's peak memory is unchanged)."""
    return 2 * SHELL_BYTES if n_blocks == 1 else SHELL_BYTES


def _shape(machine: Machine, n_blocks: int) -> tuple:
    """What a chunk's registers and executors depend on, beside the kernel: its blocks and their
    size, and the dynamic shared memory (the layout its shared-memory symbols resolve in)."""
    return n_blocks, machine.block, machine.launch.shared_bytes
