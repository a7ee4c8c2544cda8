"""Run a decoded kernel: every thread of the launch is one lane of numpy vector registers.

Blocks are grouped into chunks of whole blocks (to bound memory); within a chunk every
register is an array over all its lanes. Control flow is per lane: each lane has a PC, and
the scheduler always runs the instruction with the *minimum PC* among runnable lanes, for
all the lanes at that PC at once.

Why minimum-PC rather than a SIMT reconvergence stack: it needs no post-dominator analysis,
copes with any unstructured control flow NVRTC emits, and reconverges at the first point
where diverged paths meet again (lanes that skipped ahead wait while the lower PCs catch
up), which for the structured code of CUDA kernels is the immediate post-dominator. It is
GPUOcelot's choice too. Lanes of different blocks are scheduled together; blocks do not
synchronise with each other, so this is legal. A cooperative launch whose kernel syncs the
grid is one chunk, so that its blocks can wait for each other (``barriers.GridBarrier``);
one whose kernel never does runs one block a chunk, block 0 first: a legal order, in which
a forgotten ``grid.sync()`` before block 0 collects the others' results shows.

Fast path: while every runnable lane of the chunk is at one PC ("converged") the scheduler
runs instructions back to back without masks or PC arrays; register-only instructions then
run over all lanes (exited lanes' registers are dead). Otherwise the lanes at the minimum
PC are compacted with ``np.flatnonzero`` and run the same way, on their own, until their
PC reaches the lowest PC of the other runnable lanes (which is what minimum-PC scheduling
would run anyway), so a guarded loop body costs no PC arrays per instruction either. A
guard every lane passes costs a count, not a lane list. What a launch does once per
instruction of the program (branch targets, spin-waits, register types, barrier checks) is
done once per decoded kernel (``Decoded``); an executor is built when its instruction first
runs, and a register-only one builds only its every-lane path until some lanes run it alone
(``ops.every_lane``).

Small launches: a chunk of a few hundred lanes spends most of its time in Python per
instruction, not in numpy, so for it (``FUSED_LANES``, ``SHELL_BYTES``) a run of independent
f32 fmas (a register tile's update, ``ops.fma_runs``) is one instruction, and the chunk is kept
when its launch ends (``Chunk.release``): the next launch of the same kernel and shape runs in
it (``Chunk.acquire``), registers zeroed, with the executors that hold nothing of a launch
(register-only instructions, loads and stores through a register's address: ``portable``).
Everything a launch reports is what a fresh chunk gives (``bench/emulator_digest.py``).

Barriers: a lane at ``bar.sync`` waits; when no lane of the chunk can run, the barrier is
resolved per block: all live threads at one barrier is a clean barrier (every lane of the
chunk at one barrier, the common case, is released without the per-block analysis); a block
with exited threads, or with threads waiting at different barriers, is
``barrier_divergence``, released as the hardware releases it (exited threads do not hold a
barrier up) so outputs stay GPU-like; different barrier ids waiting on each other is a
``deadlock``.

Spin-waits: lanes that loop back over an acquire load or atomic (``ld.acquire``,
``atom.acq_rel``: how cooperative groups' tiles of more than a warp wait for each other's
warps) while other lanes can run yield to them, and take their turn again once nothing else
can run; otherwise the lowest PC would spin forever ahead of the lanes it waits for.

Limits: the lowest PC always runs first, so a lock that one thread of a block spins on
with plain or volatile loads while another holds it (legal under Volta's independent
thread scheduling) spins until the instruction budget. A barrier with a thread count
completes for its warps alone, and ``bar.arrive`` is held until its barrier completes
(``barriers.py``)."""

from __future__ import annotations

import ctypes
import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from autograder.contract import (
    Buffer,
    Finding,
    Launch,
    LaunchFailure,
    Program,
    Unsupported,
)
from autograder.emulator.access import narrow_shared_access
from autograder.emulator.barriers import GridBarrier, barrier_id, is_arrival, resolve, uncooperative_sync
from autograder.emulator.counters import BankModel, Tally, warp_count
from autograder.emulator.findings import FindingLog, dim3, fmt3
from autograder.emulator.isa import (
    BAR,
    BIG,
    BRA,
    CLOCK_REGISTERS,
    DONE,
    DTYPES,
    EXIT,
    PURE,
    RUN,
    SIDE,
    WAIT,
    Addr,
    Imm,
    Instr,
    Reg,
    Sreg,
    Sym,
    Vec,
    dtype_of,
    immediate_bits,
)
from autograder.emulator.limits import (
    barrier_operands,
    check_kernel,
    check_launch,
    dynamic_shared_start,
    is_block_barrier,
    static_shared_bytes,
)
from autograder.emulator.memory import (
    GlobalMemory,
    Region,
    SharedLayout,
    SharedMemory,
    local_bytes,
    padded,
)
from autograder.emulator.ops import (
    FUSED_LANES,
    build_executor,
    build_fma_run,
    fma_runs,
    instruction_kind,
    lane_flops,
)
from autograder.emulator.program import decode_ptx
from autograder.emulator.ptx import Kernel
from autograder.emulator.special import LaunchRegisters, clock_getter, reserved_shared
from autograder.emulator.special import read as read_special
from autograder.errors import AutograderError

CLOCKS = frozenset(Sreg(name) for name in CLOCK_REGISTERS)
NEVER = 1 << 62  # no lane outside the converged ones can run before them
NO_LANES = np.empty(0, np.int64)
NO_LANES.setflags(write=False)
YIELDED = 1 << 32  # added to the PC of lanes yielding at a spin-wait (below BIG: they can run)
STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
DEFAULT_BUDGET = 4_000_000_000  # lane instructions per launch
CHUNK_BYTES = 160 << 20  # a chunk's registers, local and shared memory (one block at least)
MAX_CHUNK_LANES = 1 << 17
SHELL_BYTES = 2 << 20  # a chunk whose registers take at most this is kept for the next launch of its shape
SHELLS_PER_KERNEL = 2  # shapes kept per decoded kernel (decoded_kernel keeps 32 kernels)
PREDEFINED_CONSTANTS = {"WARP_SZ": 32}  # PTX's predefined identifiers (warpSize compiles to WARP_SZ)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)


def keep_freed_memory() -> None:
    """Let glibc's malloc serve numpy's temporaries (a register's worth each, up to
    megabytes) from its heap rather than fresh ``mmap`` pages: otherwise every temporary of
    every instruction page-faults anew until malloc's adaptive threshold has grown, which
    made a first 65 536-lane launch 3x slower (286 k page faults). Elsewhere, a no-op.
    Process-wide, so the emulator backend calls it in its own (worker) process."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)  # glibc's largest
        libc.mallopt(M_TRIM_THRESHOLD, 128 << 20)
    except (OSError, AttributeError):
        pass


class BudgetError(AutograderError):
    def __init__(self, index: int, why: str):
        super().__init__(why)
        self.index = index


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
class Decoded:
    """A kernel's PTX parsed and decoded, with what the scheduler needs per instruction;
    shared read-only by every launch of the same PTX."""

    kernel: Kernel
    program: list[Instr]
    kinds: list[int]
    flops: np.ndarray  # per instruction: the flops each lane does (ops.lane_flops)
    barrier_ids: np.ndarray
    shadow_unit: int  # bytes per shadow word of shared memory
    reductions: tuple[int, ...]  # the barriers that reduce a predicate (bar.red), in order
    counted: tuple[int, ...]  # the barriers with a thread count (bar.sync 1, 64), in order
    block_barriers: tuple[Instr, ...]  # what limits.check_kernel checks
    shared_variables: tuple  # the block's shared memory in layout order (reserved first)
    registers: tuple[tuple[np.dtype, tuple[str, ...]], ...]  # names by storage type
    register_bytes: int  # one lane's registers
    targets: list[int]  # per instruction: a branch's target, or -1
    leaves: list[bool]  # per instruction: a branch straight to an exit (a return)?
    spins: list[bool]  # per instruction: the back-edge of a spin-wait (spin_waits)?
    fma_runs: list[int]  # per instruction: the independent f32 fmas from it on (ops.fma_runs)
    line_of: np.ndarray  # per instruction: its source line, -1 for none (the counters' rows)
    portable: list[bool]  # per instruction: its executor holds nothing of a launch (portable)
    # small chunks a launch left, by shape, for the next launch of that shape (Chunk.acquire)
    shells: dict = field(default_factory=dict, compare=False)


@functools.lru_cache(maxsize=32)
def decoded_kernel(ptx: str, lowered_name: str, filename: str) -> Decoded:
    """Parse and decode once per PTX text: grading launches one kernel for many cases."""
    kernel, program = decode_ptx(ptx, lowered_name, filename)
    barrier_ids = _frozen([barrier_id(ins) for ins in program] or [-1])
    kinds = [BAR if is_arrival(ins) else instruction_kind(ins) for ins in program]  # held: barriers.py
    reductions = tuple(k for k, ins in enumerate(program) if kinds[k] == BAR and "red" in ins.mods)
    counted = tuple(k for k, ins in enumerate(program) if kinds[k] == BAR and barrier_operands(ins)[1])
    shared = reserved_shared(program) + [v for v in kernel.variables if v.space == "shared"]
    register_bytes = sum(storage_dtype(t).itemsize for t in kernel.registers.values())
    targets = [ins.target for ins in program]
    exits = {k for k, ins in enumerate(program) if kinds[k] == EXIT and ins.guard is None}
    return Decoded(
        kernel,
        program,
        kinds,
        _frozen([lane_flops(ins) for ins in program]),
        barrier_ids,
        1 if narrow_shared_access(program) else 4,
        reductions,
        counted,
        tuple(ins for ins in program if is_block_barrier(ins)),
        tuple(shared),
        _register_types(kernel),
        register_bytes + 8 * len(kernel.call_params),
        targets,
        [target in exits for target in targets],
        spin_waits(program),
        fma_runs(program, kernel.registers),
        _frozen([-1 if ins.line is None else ins.line for ins in program]),
        [portable(kind, ins) for kind, ins in zip(kinds, program, strict=True)],
    )


def decode_launchable(ptx: str, lowered_name: str, program: Program) -> Decoded:
    """The decoded kernel, or the :class:`BackendError` a student reads: ``Unsupported``
    for PTX the emulator cannot read, ``CompileError`` for a kernel ptxas refuses for
    ``sm_90`` (``limits.check_kernel``)."""
    try:
        decoded = decoded_kernel(ptx, lowered_name, program.filename)
    except (ValueError, KeyError, IndexError) as error:
        raise Unsupported(f"the emulator cannot read this kernel's PTX: {error}") from error
    check_kernel(decoded.kernel.variables, decoded.block_barriers, program)
    return decoded


class Machine:
    """One launch: global memory, parameters, findings, counters, and the chunks' runs."""

    def __init__(self, ptx: str, lowered_name: str, launch: Launch, budget: int = DEFAULT_BUDGET):
        self.launch = launch
        self.filename = launch.program.filename
        self.decoded = decoded = decode_launchable(ptx, lowered_name, launch.program)
        self.kernel: Kernel = decoded.kernel
        self.program: list[Instr] = decoded.program
        self.kinds, self.barrier_ids = decoded.kinds, decoded.barrier_ids
        self.reductions, self.counted = decoded.reductions, decoded.counted
        self.grid = tuple(launch.grid)
        self.block = tuple(launch.block)
        check_launch(self.kernel.variables, self.kernel.params, launch)
        self.threads = math.prod(self.block)
        self.n_blocks = math.prod(self.grid)
        self.log = FindingLog(self.filename, self.program)
        self.tally = Tally(len(self.program))
        self.banks = BankModel()
        self.stdout: list[str] = []
        self.budget = budget
        self.executed = 0
        self.deadline = time.monotonic() + 0.8 * launch.time_limit_s
        self.memory = GlobalMemory()
        self.symbols: dict[str, int] = {}
        self._place_arguments()
        self.layout = SharedLayout(decoded.shared_variables, launch.shared_bytes)
        self.local_size = local_bytes(self.kernel.variables)
        self.shadow_unit = decoded.shadow_unit
        self._local_offsets()
        used = static_shared_bytes(self.kernel.variables)
        if launch.shared_bytes:
            used = dynamic_shared_start(self.kernel.variables) + launch.shared_bytes
        self.special = LaunchRegisters(self.grid, self.block, used, launch.shared_bytes)

    # ----- setup -------------------------------------------------------------
    def _place_arguments(self) -> None:
        params = self.kernel.params
        blob = bytearray()
        self.param_offset: dict[str, int] = {}
        for param, arg in zip(params, self.launch.args, strict=False):
            while len(blob) % param.align:
                blob.append(0)
            self.param_offset[param.name] = len(blob)
            if isinstance(arg, Buffer):
                value = self.memory.add(Region(arg.name, arg.data, "argument")).to_bytes(8, "little")
            else:
                value = np.array(arg.value).astype(arg.dtype).tobytes()
            blob += value[: param.size].ljust(param.size, b"\0")
        self.params = np.frombuffer(bytes(blob.ljust(padded(len(blob)), b"\0")), np.uint8)
        for var in self.kernel.variables:
            if var.space in ("global", "const"):
                data = np.zeros(max(var.size, 1), np.uint8)  # limits.py caps their size
                data[: len(var.init or b"")] = np.frombuffer(var.init or b"", np.uint8)
                self.symbols[var.name] = self.memory.add(Region(var.name, data, "variable", var.space))

    def _local_offsets(self) -> None:
        offset = 0
        for var in self.kernel.variables:
            if var.space == "local":
                self.symbols[var.name] = offset
                offset += (var.size + 15) // 16 * 16

    def symbol_value(self, name: str) -> int:
        if name in self.layout.offset:
            return self.layout.offset[name]
        if name in self.symbols:
            return self.symbols[name]
        if name in PREDEFINED_CONSTANTS:
            return PREDEFINED_CONSTANTS[name]
        raise Unsupported(f"symbol {name} is not supported by the emulator")

    # ----- running -----------------------------------------------------------
    def run(self) -> None:
        self.grid_barrier = GridBarrier(self) if self.launch.cooperative else None
        per_block = self.threads * (self.decoded.register_bytes + self.local_size + 48)
        per_block += self.layout.block_bytes * 6
        blocks = max(1, min(CHUNK_BYTES // per_block, MAX_CHUNK_LANES // self.threads))
        if self.grid_barrier:  # a grid sync waits for every block (limits.py bounds the grid);
            blocks = self.n_blocks if self.grid_barrier.arrivals else 1  # none: block 0 first, alone
        try:
            with np.errstate(all="ignore"):
                for first in range(0, self.n_blocks, blocks):
                    chunk = Chunk.acquire(self, first, min(blocks, self.n_blocks - first))
                    try:
                        chunk.run()
                    finally:
                        chunk.release()
                    self.special.chunk_done(chunk.steps)
        except BudgetError as stop:
            ins = self.program[stop.index]
            self.log.add(
                Finding(
                    "instruction_budget",
                    f"{self.log.where(ins.line)}: the kernel did not finish: {stop}",
                    line=ins.line,
                )
            )
        except LaunchFailure as failure:
            explained = uncooperative_sync(self, failure)
            if explained is None:
                raise
            raise explained from failure

    def over_budget(self, index: int) -> BudgetError:
        return BudgetError(
            index, f"it ran past the budget of {self.budget:,} instructions (an endless loop?)"
        )

    def check_time(self, index: int) -> None:
        if time.monotonic() > self.deadline:
            raise BudgetError(index, "it ran past the time limit of the case (an endless loop?)")

    def outputs(self) -> dict[str, np.ndarray]:
        return {
            arg.name: self.memory.regions[self.memory.by_name[arg.name]].contents()
            for arg in self.launch.args
            if isinstance(arg, Buffer)
        }

    def counters(self):
        return self.tally.counters(self.decoded.line_of, self.decoded.flops)


class Chunk:
    """Whole blocks ``first .. first + n_blocks - 1`` of the grid, all threads as lanes."""

    def __init__(self, machine: Machine, first: int, n_blocks: int):
        self.m = machine
        bs = machine.threads
        self.bs = bs
        self.n_blocks = n_blocks
        self.n = n = n_blocks * bs
        self.lane_slot = np.repeat(np.arange(n_blocks, dtype=np.int64), bs)
        self.lane_tid = np.tile(np.arange(bs, dtype=np.int64), n_blocks)
        self.tid32 = self.lane_tid.astype(np.int32)
        self.warps_per_block = (bs + 31) // 32
        self.warp_of = self.lane_slot * self.warps_per_block + self.lane_tid // 32
        self.n_warps = n_blocks * self.warps_per_block
        self.full_warps = bs % 32 == 0
        self.all_lanes = np.arange(n, dtype=np.int64)
        self.rows = _registers(machine.decoded.registers, n)  # per register: (its type's table, its row)
        self.regs = {name: table[k] for name, (table, k) in self.rows.items()}
        self.tables = list({id(table): table for table, _k in self.rows.values()}.values())  # one a type
        self._views: dict[tuple, np.ndarray] = {}
        self._constants: dict[tuple, np.ndarray | np.generic] = {}  # immediates, by (operand, dtype)
        self._scratch: dict[tuple, np.ndarray] = {}
        # per instruction: (executor, kind, guard), made when the scheduler first reaches it
        # (about 40% of a program's instructions never run in a given launch); branches,
        # exits and barriers are the scheduler's and have no executor; the others' are built
        # when they first run
        self.plan: list[tuple | None] = [None] * len(machine.program)
        # a small chunk runs a run of independent fmas as one (ops.fma_runs), built by its first
        self.runs = machine.decoded.fma_runs if n <= FUSED_LANES else [0] * len(machine.program)
        self.fused: dict[int, object] = {}
        self.ran: dict[int, list[int]] = {}  # per run of fmas run (by its first): its lanes and warps
        self.memo_bytes = 0  # what its instructions remember of their requests (access.MEMO_BYTES)
        self.bind(machine, first)

    def bind(self, machine: Machine, first: int) -> None:
        """What is the launch's and this chunk's own: blocks ``first ..``, shared and local
        memory, special registers and symbols."""
        self.m = machine
        self.block_linear = first + np.arange(self.n_blocks, dtype=np.int64)
        self.shared = SharedMemory(machine.layout, self.n_blocks, machine.shadow_unit)
        self.shared_base = self.lane_slot * self.shared.block_bytes
        self.local = np.full(max(machine.local_size, 16) * self.n, 0xFF, np.uint8)
        self._sregs: dict[str, np.ndarray | np.generic] = {}
        self._launch_constants: dict[tuple, np.ndarray | np.generic] = {}  # special registers, symbols
        self.steps = 0  # the scheduler's steps so far, as the last SIDE instruction saw them
        self.clock_start: np.ndarray | None = None  # per lane, for the clocks (special.py)

    @classmethod
    def acquire(cls, machine: Machine, first: int, n_blocks: int) -> Chunk:
        """Blocks ``first .. first + n_blocks - 1``: in the chunk an earlier launch of the same
        kernel and shape left (``release``), its registers zeroed, with the executors that hold
        nothing of a launch (``portable``: building them is most of a small launch's cost);
        else in a new chunk."""
        shell = machine.decoded.shells.pop(_shape(machine, n_blocks), None)
        if shell is None:
            return cls(machine, first, n_blocks)
        for table in shell.tables:
            table.fill(0)
        shell.bind(machine, first)
        return shell

    def _bind(self, k: int) -> tuple:
        """Instruction ``k``'s plan entry."""
        kind = self.m.kinds[k]
        guard = self._guard(self.m.program[k].guard)
        entry = self.plan[k] = (self._deferred(k) if kind <= SIDE else None, kind, guard)
        return entry

    def _fused(self, k: int, span: int):
        """The executor of the run of fmas ``k .. k + span - 1``."""
        run = self.fused[k] = build_fma_run(self.m.program[k : k + span], self)
        return run

    def _deferred(self, k: int):
        def first_run(idx):
            run = build_executor(self.m.program[k], self)
            self.plan[k] = (run, *self.plan[k][1:])
            run(idx)

        return first_run

    def release(self) -> None:
        """Keep a small chunk for the next launch of its shape (``acquire``) with its portable
        executors, the launch's state dropped; else drop the executors
        (closures over this chunk) so that its arrays are freed now."""
        m = self.m
        if self.n * m.decoded.register_bytes <= SHELL_BYTES and not m.launch.cooperative:
            kept = m.decoded.portable
            self.plan = [entry if entry and kept[k] else None for k, entry in enumerate(self.plan)]
            self.m = self.shared = self.local = self.clock_start = None
            self._sregs.clear()
            self._launch_constants.clear()
            shells = m.decoded.shells
            if len(shells) >= SHELLS_PER_KERNEL:  # the oldest shape goes
                shells.pop(next(iter(shells)))
            shells[_shape(m, self.n_blocks)] = self
            return
        self.plan = []
        self.fused.clear()
        self.regs.clear()
        self.rows.clear()
        self.tables.clear()
        self._views.clear()
        self._constants.clear()
        self._launch_constants.clear()
        self._scratch.clear()
        self._sregs.clear()
        self.clock_start = None
        self.local = self.shared = None

    # ----- operand binding -----------------------------------------------------
    def reg(self, name: str) -> np.ndarray:
        try:
            return self.regs[name]
        except KeyError:
            raise Unsupported(f"register {name} is not declared") from None

    def view(self, operand, dtype) -> np.ndarray | None:
        """The register itself, seen as ``dtype``, when that is a plain reinterpretation."""
        if type(operand) is not Reg or operand.negate:
            return None
        key = (operand.name, dtype)
        view = self._views.get(key)
        if view is None:
            storage = self.reg(operand.name)
            if storage.dtype.itemsize != np.dtype(dtype).itemsize:
                return None
            view = self._views[key] = storage.view(dtype)
        return view

    def consecutive(self, operands, dtype) -> np.ndarray | None:
        """Registers ``operands`` as one (len, lanes) view of ``dtype``, where they are
        consecutive rows of one table (a vector load's destinations, mostly); else None."""
        if not all(type(o) is Reg and not o.negate and o.name in self.rows for o in operands):
            return None
        rows = [self.rows[o.name] for o in operands]
        table, first = rows[0]
        if any(t is not table or k != first + j for j, (t, k) in enumerate(rows)):
            return None
        if table.dtype.itemsize != np.dtype(dtype).itemsize:
            return None
        return table[first : first + len(rows)].view(dtype)

    def scratch(self, dtype, rows: int = 0, slot: int = 0) -> np.ndarray:
        """A temporary register of ``dtype`` that executors share, or ``rows`` of them (a run
        of fmas'; ``slot`` tells apart those one executor needs at once): valid only while one
        runs."""
        key = (np.dtype(dtype), rows, slot)
        array = self._scratch.get(key)
        if array is None:
            array = self._scratch[key] = np.empty((rows, self.n) if rows else self.n, dtype)
        return array

    def full(self, operand, dtype):
        """A value valid for the whole chunk (array or scalar), or None if it must be computed;
        constants and special registers are converted once per chunk and shared (read-only)."""
        kind = type(operand)
        if kind is Reg:
            return self.view(operand, dtype)
        if kind is not Imm and kind is not Sym and kind is not Sreg:
            return None
        if kind is Sreg and operand in CLOCKS:  # a clock changes: read when it runs (src)
            return None
        key = (operand, dtype)
        cache = self._constants if kind is Imm else self._launch_constants
        value = cache.get(key)
        if value is None:
            value = cache[key] = self._constant(operand, dtype)
        return value

    def _constant(self, operand, dtype):
        if type(operand) is not Sreg:
            return self.scalar(operand, dtype)
        value = self.sreg(operand.name)
        return value.astype(dtype) if isinstance(value, np.ndarray) else np.dtype(dtype).type(value)

    def scalar(self, operand, dtype):
        dtype = np.dtype(dtype)
        if isinstance(operand, Sym):
            return _as_scalar(self.m.symbol_value(operand.name), dtype)
        return _immediate(operand.text, dtype)

    def src(self, operand, dtype):
        """``get(idx)``: the operand's values for lanes ``idx`` (None: every lane)."""
        full = self.full(operand, dtype)
        if isinstance(full, np.ndarray):
            return lambda idx: full if idx is None else full[idx]
        if full is not None:
            return lambda idx: full
        if isinstance(operand, Reg):
            storage = self.reg(operand.name)
            if operand.negate:
                return lambda idx: ~storage if idx is None else ~storage[idx]
            return _converting_getter(storage, np.dtype(dtype))
        if isinstance(operand, Sreg):  # a clock: read when the instruction runs
            get = clock_getter(operand.name, self)
            return lambda idx: np.asarray(get(idx)).astype(dtype)
        raise Unsupported(f"operand {operand} is not supported by the emulator")

    def dst(self, operand, dtype):
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

        def put(idx, value):
            if idx is None:
                np.copyto(view, value, casting="unsafe")
            else:
                view[idx] = value

        return put

    def address(self, addr: Addr):
        """``get(idx)`` of the int64 addresses an ``[base+offset]`` operand names."""
        if isinstance(addr.base, Reg):
            storage = self.reg(addr.base.name)
            base = storage.view(np.int64) if storage.itemsize == 8 else storage.astype(np.int64)
            if storage.itemsize != 8:
                return lambda idx: (storage if idx is None else storage[idx]).astype(np.int64) + addr.offset
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

    def sreg(self, name: str):
        if name not in self._sregs:
            self._sregs[name] = self._special(name)
        return self._sregs[name]

    def _special(self, name: str):
        try:
            return read_special(name, self)
        except KeyError:
            raise Unsupported(f"special register {name} is not supported by the emulator") from None

    def _guard(self, guard: Reg | None):
        if guard is None:
            return None
        storage = self.reg(guard.name)
        return (lambda: ~storage) if guard.negate else (lambda: storage)

    # ----- describing lanes ------------------------------------------------------
    def thread(self, lane: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        tid = dim3(int(self.lane_tid[lane]), self.m.block)
        block = dim3(int(self.block_linear[self.lane_slot[lane]]), self.m.grid)
        return tid, block

    def who(self, lane: int) -> str:
        tid, block = self.thread(lane)
        return f"thread {fmt3(tid)} of block {fmt3(block)}"

    # ----- scheduling --------------------------------------------------------------
    def run(self) -> None:
        m = self.m
        try:
            m.executed = m.budget - self._schedule(m.budget - m.executed)
        finally:
            self._tally_runs()

    def _tally_runs(self) -> None:
        """Count the runs of fmas (``_schedule`` ran each as one) for each of their instructions."""
        tally = self.m.tally
        for first, (lanes, warps) in self.ran.items():
            for k in range(first, first + self.runs[first]):
                tally.lanes[k] += lanes
                tally.warps[k] += warps
        self.ran = {}

    def _schedule(self, left: int) -> int:
        """Run every lane to its end, ``left`` lane instructions at most (BudgetError past
        them, which ends the launch); returns how many are left."""
        m = self.m
        plan = self.plan
        targets, leaves, spins = m.decoded.targets, m.decoded.leaves, m.decoded.spins
        runs, fused = self.runs, self.fused
        ran = self.ran
        tally_lanes, tally_warps = m.tally.lanes, m.tally.warps
        warp_of = self.warp_of
        n = self.n
        status = np.zeros(n, np.int8)
        pc = np.zeros(n, np.int64)
        self.status, self.pc = status, pc
        self.wait_pc = np.zeros(n, np.int64)
        self.exit_pc = np.full(n, -1, np.int64)  # per lane: the branch to the exit it took, or the exit
        n_run = n
        converged, cur = True, 0
        act, act_n, act_warps, dense = None, n, self.n_warps, True
        every = None  # what a pure instruction of every active lane gets: None (all lanes) or act
        stop_at = NEVER  # the lowest PC of the runnable lanes outside act
        steps = 0
        while True:
            steps += 1
            if steps & 4095 == 0:
                m.check_time(cur)
            if converged:
                i = cur
                if i >= stop_at:  # the other lanes' turn, or they join these: schedule by PC
                    pc[act] = i
                    converged = False
                    continue
                span = runs[i]
                if span and every is None and i + span <= stop_at and left >= act_n * span:
                    counted = ran.get(i)  # a run of fmas, every lane: as one instruction
                    if counted is None:
                        counted = ran[i] = [0, 0]
                    counted[0] += act_n
                    counted[1] += act_warps
                    left -= act_n * span
                    steps += span - 1
                    (fused.get(i) or self._fused(i, span))()
                    cur = i + span
                    continue
                run, kind, g = plan[i] or self._bind(i)
                if g is None and kind == PURE:  # the common case, kept short
                    tally_lanes[i] += act_n
                    tally_warps[i] += act_warps
                    left -= act_n
                    if left < 0:
                        raise m.over_budget(i)
                    run(every)
                    cur = i + 1
                    continue
                if g is None:
                    sel, sel_n, sel_w = act, act_n, act_warps
                else:
                    gv = g()
                    if act is None:  # every lane: a count first, a lane list only if some are off
                        sel_n = int(np.count_nonzero(gv))
                    else:
                        sel = act[gv[act]]
                        sel_n = sel.size
                    if sel_n == act_n:
                        sel, sel_w = act, act_warps
                    elif sel_n == 0:  # a guard no lane passes: nothing runs (a branch not taken)
                        sel, sel_w = NO_LANES, 0
                    else:
                        sel = np.flatnonzero(gv) if act is None else sel
                        sel_w = warp_count(warp_of[sel])
                tally_lanes[i] += sel_n
                tally_warps[i] += sel_w
                left -= sel_n
                if left < 0:
                    raise m.over_budget(i)
                if kind == PURE:
                    if sel_n:
                        run(None if (sel is act and dense) else sel)
                    cur = i + 1
                elif kind == SIDE:
                    if sel_n:
                        self.steps = steps  # what a clock read (special.py) counts
                        run(sel)
                    cur = i + 1
                elif kind == BRA:
                    target = targets[i]
                    if leaves[i] and sel_n:
                        self.exit_pc[self.all_lanes if sel is None else sel] = i
                    if spins[i] and sel_n and (stop_at < BIG or sel_n < act_n):  # others run first
                        pc[self.all_lanes if act is None else act] = i + 1
                        pc[self.all_lanes if sel is None else sel] = target + YIELDED
                        converged = False
                    elif sel_n == act_n:
                        cur = target
                    elif sel_n == 0:
                        cur = i + 1
                    else:
                        pc[self.all_lanes if act is None else act] = i + 1
                        pc[sel] = target
                        converged = False
                else:
                    if sel_n:
                        lanes = self.all_lanes if sel is None else sel
                        n_run -= lanes.size
                        self._stop(lanes, i, kind)
                    if n_run == 0 or sel_n == act_n:
                        converged = False
                        continue
                    act = np.flatnonzero(status == RUN) if act is None else act[status[act] == RUN]
                    act_n = act.size
                    act_warps = warp_count(warp_of[act])
                    dense = dense and kind == EXIT
                    every = None if dense else act
                    cur = i + 1
                continue
            low = pc.min()
            if YIELDED <= low < BIG:  # only lanes that yielded at spin-waits can run: their turn
                pc[pc < BIG] -= YIELDED
                continue
            if low >= BIG:
                if not (status == WAIT).any():
                    self.steps = steps
                    return left
                n_run = self._release()
                continue
            sel = np.flatnonzero(pc == low)
            converged, cur = True, int(low)
            if sel.size == n_run:
                act = None if n_run == n else sel
                act_n = n_run
                act_warps = self.n_warps if act is None else warp_count(warp_of[act])
                dense = not (status == WAIT).any()
                stop_at = NEVER
            else:  # the lanes at the lowest PC run alone until they reach the next lowest
                act, act_n, act_warps, dense = sel, sel.size, warp_count(warp_of[sel]), False
                stop_at = int(pc[pc != low].min())
            every = None if dense else act

    def _stop(self, lanes: np.ndarray, i: int, kind: int) -> None:
        """Lanes leave the runnable set: they exit, or wait at a barrier."""
        self.pc[lanes] = BIG
        if kind == EXIT:
            self.status[lanes] = DONE
            branched = self.exit_pc[lanes]  # where a return left, not the closing brace's exit
            self.exit_pc[lanes] = np.where(branched < 0, i, branched)
        else:
            self.status[lanes] = WAIT
            self.wait_pc[lanes] = i

    def _release(self) -> int:
        """No lane can run and some wait at barriers: resolve every block's barrier."""
        resolve(self)
        return int(np.count_nonzero(self.status == RUN))


def portable(kind: int, ins: Instr) -> bool:
    """Does the executor of ``ins`` hold nothing of a launch but its chunk's registers, so that
    it serves the next launch of the same shape (``Chunk.acquire``)? A register-only
    instruction's does; so does a load's or store's through a register's address, and
    ``ld.param``'s (it reads the launch's arguments when it runs): memory, counters and
    findings are the chunk's launch's when it runs (``access.Access.m``). Special registers and
    symbols are read when an executor is built, so an instruction naming one is not portable."""
    if ins.op in ("ld", "ldu", "st") and isinstance(ins.operands[0 if ins.op == "st" else 1], Addr):
        address = ins.operands[0 if ins.op == "st" else 1]
        rest = [o for o in ins.operands if o is not address]
        if "param" in ins.mods:
            return ins.op != "st" and type(address.base) is Sym and _registers_only(rest)
        return type(address.base) is Reg and _registers_only(rest)
    return kind == PURE and _registers_only(ins.operands)


def _registers_only(operands) -> bool:
    items = [item for o in operands for item in (o.items if isinstance(o, Vec) else (o,))]
    return all(type(o) is Reg or type(o) is Imm for o in items)


def spin_waits(program: list[Instr]) -> list[bool]:
    """Per instruction: is it the back-edge of a loop whose body holds an acquire load or
    atomic (a spin-wait, see the module's docstring)?"""
    acquires = np.cumsum(
        [0] + [ins.op in ("ld", "atom") and bool({"acquire", "acq_rel"} & set(ins.mods)) for ins in program]
    )
    return [
        ins.op == "bra" and 0 <= ins.target <= k and acquires[k + 1] > acquires[ins.target]
        for k, ins in enumerate(program)
    ]


def _frozen(values: list[int]) -> np.ndarray:
    array = np.array(values, np.int64)
    array.setflags(write=False)
    return array


def _shape(machine: Machine, n_blocks: int) -> tuple:
    """What a chunk's registers and executors depend on, beside the kernel: its blocks and their
    size, and the dynamic shared memory (the layout its shared-memory symbols resolve in)."""
    return n_blocks, machine.block, machine.launch.shared_bytes


def _register_types(kernel: Kernel) -> tuple[tuple[np.dtype, tuple[str, ...]], ...]:
    """The kernel's registers (and the parameters of the calls it inlined) by storage type."""
    types = {name: storage_dtype(t) for name, t in kernel.registers.items()}
    types.update(dict.fromkeys(kernel.call_params, np.dtype(np.uint64)))
    by_type: dict[np.dtype, list[str]] = {}
    for name, dt in types.items():
        by_type.setdefault(dt, []).append(name)
    return tuple((dt, tuple(names)) for dt, names in by_type.items())


def _registers(
    types: tuple[tuple[np.dtype, tuple[str, ...]], ...], n: int
) -> dict[str, tuple[np.ndarray, int]]:
    """Every register of ``n`` lanes, zeroed: one allocation per storage type, a row each;
    per name, its type's allocation and its row there."""
    rows = {}
    for dt, names in types:
        table = np.zeros((len(names), n), dt)
        rows.update((name, (table, k)) for k, name in enumerate(names))
    return rows


@functools.lru_cache(maxsize=4096)
def _immediate(text: str, dtype: np.dtype):
    """An immediate operand as a numpy scalar of ``dtype``, the same in every launch."""
    return _as_scalar(immediate_bits(text, ""), dtype)


def _as_scalar(value, dtype: np.dtype):
    if dtype.kind == "f":
        return dtype.type(value)
    if dtype.kind == "b":
        return np.bool_(value)
    bits = 8 * dtype.itemsize
    return np.array(int(value) & ((1 << bits) - 1), STORAGE[dtype.itemsize]).view(dtype)[()]


def _converting_getter(storage: np.ndarray, dtype: np.dtype):
    """Read a register of another width: integers truncate or extend, as PTX allows."""

    def get(idx):
        values = storage if idx is None else storage[idx]
        return values.astype(dtype)

    return get
