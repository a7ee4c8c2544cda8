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
instruction, not in numpy, so for it (``ops.FUSED_LANES``, ``chunk.SHELL_BYTES``) a run of independent
f32 fmas (a register tile's update, ``ops.fma_runs``) is one instruction, as is a run of wmma.mmas,
and the chunk is kept when its launch ends (``chunk.Chunk.release``): the next launch of the same
kernel and shape runs in it (``Chunk.acquire``), registers zeroed, with the executors that hold
nothing of a launch (register-only instructions, loads and stores through a register's address:
``portable``) and, where it runs the same blocks of the same grid, those that read their special registers
(``placed``).
Most launches are the first of their kernel at their shape, so a small chunk's register-only
instructions run executors built once per kernel, which read the registers of the chunk they
are bound to when they run (``shared.py``). Everything a launch reports is what a fresh chunk
gives (``bench/emulator_digest.py``).

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
import gc
import importlib
import math
import time
from dataclasses import dataclass, field

import numpy as np

from autograder.contract import (
    Buffer,
    Finding,
    Launch,
    LaunchFailure,
    LaunchResult,
    Program,
    Unsupported,
)
from autograder.emulator.access import narrow_shared_access
from autograder.emulator.barriers import GridBarrier, barrier_id, is_arrival, uncooperative_sync
from autograder.emulator.chunk import Chunk
from autograder.emulator.counters import BankModel, LineRows, Tally
from autograder.emulator.findings import FindingLog
from autograder.emulator.isa import BAR, EXIT, PURE, Addr, Imm, Instr, Reg, Sreg, Sym, Vec
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
    local_bytes,
    padded,
)
from autograder.emulator.ops import fma_runs, instruction_kind, lane_flops
from autograder.emulator.program import decode_ptx
from autograder.emulator.ptx import Kernel
from autograder.emulator.registers import RegisterLayout, register_types, storage_dtype
from autograder.emulator.scheduler import Scheduler
from autograder.emulator.shared import Shared
from autograder.emulator.special import PLACED, LaunchRegisters, ShapeRegisters, reserved_shared
from autograder.errors import AutograderError

DEFAULT_BUDGET = 4_000_000_000  # lane instructions per launch
CHUNK_BYTES = 160 << 20  # a chunk's registers, local and shared memory (one block at least)
MAX_CHUNK_LANES = 1 << 17
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


COLLECT_AFTER = 50_000  # container objects allocated (net) between two young collections (Python: 700)


def quiet_collector() -> None:
    """Collect cyclic garbage less often, and import now what numpy imports at its first
    ``np.unique`` (``numpy.ma``, 10-20 ms: else in the first launch, whose time is charged).
    A launch allocates its executors (closures) by the thousand and most live as long as their
    chunk: at Python's default thresholds the collector ran 2 300 times in a grading of the
    course's references and took 1.6 of its 9.7 s (16 full collections over every decoded
    kernel); at these, 15 times and 0.1 s, the peak memory the same (a chunk's executors are
    dropped without the collector: ``plan.Plan.drop``). Process-wide, like ``keep_freed_memory``."""
    gc.set_threshold(COLLECT_AFTER, 20, 20)
    importlib.import_module("numpy.ma")


class BudgetError(AutograderError):
    def __init__(self, index: int, why: str):
        super().__init__(why)
        self.index = index


@dataclass(frozen=True)
class Decoded:
    """A kernel's PTX parsed and decoded, with what the scheduler needs per instruction;
    shared read-only by every launch of the same PTX."""

    kernel: Kernel
    program: list[Instr]
    kinds: list[int]
    barrier_ids: np.ndarray
    shadow_unit: int  # bytes per shadow word of shared memory
    reductions: tuple[int, ...]  # the barriers that reduce a predicate (bar.red), in order
    counted: tuple[int, ...]  # the barriers with a thread count (bar.sync 1, 64), in order
    block_barriers: tuple[Instr, ...]  # what limits.check_kernel checks
    shared_variables: tuple  # the block's shared memory in layout order (reserved first)
    registers: RegisterLayout  # names by storage type, and where each lies
    register_bytes: int  # one lane's registers
    targets: list[int]  # per instruction: a branch's target, or -1
    leaves: list[bool]  # per instruction: a branch straight to an exit (a return)?
    spins: list[bool]  # per instruction: the back-edge of a spin-wait (spin_waits)?
    fma_runs: list[int]  # per instruction: the independent f32 fmas or mmas from it on (ops.fma_runs)
    rows: LineRows  # the counters' rows: each instruction's source line and flops (ops.lane_flops)
    portable: list[bool]  # per instruction: its executor holds nothing of a launch (portable)
    placed: list[bool]  # per instruction: nothing of a launch but its blocks' special registers (placed)
    shared: Shared = field(compare=False)  # the executors its small chunks share (shared.py)
    # small chunks a launch left, by shape, for the next launch of that shape (Chunk.acquire)
    shells: dict = field(default_factory=dict, compare=False)
    frames: dict = field(default_factory=dict, compare=False)  # its launches' frames by shape (frame)


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
    line_of = _frozen([-1 if ins.line is None else ins.line for ins in program])
    flops = _frozen([lane_flops(ins) for ins in program])
    movable = [portable(kind, ins) for kind, ins in zip(kinds, program, strict=True)]
    layout = register_types(kernel)
    return Decoded(
        kernel,
        program,
        kinds,
        barrier_ids,
        1 if narrow_shared_access(program) else 4,
        reductions,
        counted,
        tuple(ins for ins in program if is_block_barrier(ins)),
        tuple(shared),
        layout,
        register_bytes + 8 * len(kernel.call_params),
        targets,
        [target in exits for target in targets],
        spin_waits(program),
        fma_runs(program, kernel.registers),
        LineRows(line_of, flops),
        movable,
        [moves or placed(kind, ins) for moves, kind, ins in zip(movable, kinds, program, strict=True)],
        Shared(program, kinds, movable, layout),
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


FRAMES_PER_KERNEL = 64  # shapes whose frames a decoded kernel keeps (then it starts over)


@dataclass(frozen=True)
class Frame:
    """What a launch of a decoded kernel needs that depends on its shape alone: the layout of a
    block's shared memory, a thread's local frame and where its variables lie in it, the special
    registers the shape fixes, where each parameter lies in the parameter block (its arguments'
    values are each launch's); worked out once per shape (``launch_frame``), read-only."""

    layout: SharedLayout
    local_size: int
    local_offsets: dict[str, int]
    registers: ShapeRegisters
    param_offsets: dict[str, int]  # where each parameter lies in the launch's parameter block
    param_bytes: int  # the block's size

    @classmethod
    def of(cls, decoded: Decoded, launch: Launch) -> Frame:
        variables = decoded.kernel.variables
        params = decoded.kernel.params[: len(launch.args)]
        used = static_shared_bytes(variables)
        if launch.shared_bytes:
            used = dynamic_shared_start(variables) + launch.shared_bytes
        offsets: dict[str, int] = {}
        offset = 0
        for var in variables:
            if var.space == "local":
                offsets[var.name] = offset
                offset += (var.size + 15) // 16 * 16
        return cls(
            SharedLayout(decoded.shared_variables, launch.shared_bytes),
            local_bytes(variables),
            offsets,
            ShapeRegisters.of(tuple(launch.grid), tuple(launch.block), used, launch.shared_bytes),
            *parameter_block(params),
        )


def parameter_block(params) -> tuple[dict[str, int], int]:
    """Where each of ``params`` lies in a launch's parameter block (each at its alignment, in
    order), and the block's size, padded (``memory.padded``)."""
    offsets: dict[str, int] = {}
    end = 0
    for param in params:
        offsets[param.name] = start = -(-end // param.align) * param.align
        end = start + param.size
    return offsets, padded(end)


def launch_frame(decoded: Decoded, launch: Launch) -> Frame:
    """The frame of ``launch``'s shape, once ``limits.check_launch`` has passed it: a launch of the
    same grid, block, dynamic shared memory, cooperation and number of arguments passes as well
    (what else it checks is the kernel's)."""
    shape = (
        tuple(launch.grid),
        tuple(launch.block),
        launch.shared_bytes,
        launch.cooperative,
        len(launch.args),
    )
    frame = decoded.frames.get(shape)
    if frame is None:
        check_launch(decoded.kernel.variables, decoded.kernel.params, launch)
        if len(decoded.frames) >= FRAMES_PER_KERNEL:
            decoded.frames.clear()
        frame = decoded.frames[shape] = Frame.of(decoded, launch)
    return frame


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
        frame = launch_frame(decoded, launch)
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
        self._place_arguments(frame)
        self.layout, self.local_size = frame.layout, frame.local_size
        self.shadow_unit = decoded.shadow_unit
        self.symbols.update(frame.local_offsets)
        self.special = LaunchRegisters(frame.registers)

    # ----- setup -------------------------------------------------------------
    def _place_arguments(self, frame: Frame) -> None:
        self.param_offset = frame.param_offsets  # read-only: the shape's
        blob = bytearray(frame.param_bytes)
        for param, arg in zip(self.kernel.params, self.launch.args, strict=False):
            if isinstance(arg, Buffer):
                value = self.memory.add(Region(arg.name, arg.data, "argument")).to_bytes(8, "little")
            else:
                value = np.array(arg.value).astype(arg.dtype).tobytes()
            start = self.param_offset[param.name]
            blob[start : start + param.size] = value[: param.size].ljust(param.size, b"\0")
        self.params = np.frombuffer(bytes(blob), np.uint8)
        for var in self.kernel.variables:
            if var.space in ("global", "const"):
                data = np.zeros(max(var.size, 1), np.uint8)  # limits.py caps their size
                data[: len(var.init or b"")] = np.frombuffer(var.init or b"", np.uint8)
                self.symbols[var.name] = self.memory.add(Region(var.name, data, "variable", var.space))

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
                        self.executed = self.budget - Scheduler(chunk).run(self.budget - self.executed)
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
        return self.tally.counters(self.decoded.rows)


def emulate(ptx: str, lowered_name: str, launch: Launch, budget: int = DEFAULT_BUDGET) -> LaunchResult:
    """Run ``launch`` on the kernel ``lowered_name`` of ``ptx``; buffers are copied, not changed."""
    machine = Machine(ptx, lowered_name, launch, budget)
    machine.run()
    return LaunchResult(
        outputs=machine.outputs(),
        findings=machine.log.findings(),
        counters=machine.counters(),
        stdout="".join(machine.stdout),
    )


def portable(kind: int, ins: Instr) -> bool:
    """Does the executor of ``ins`` hold nothing of a launch but its chunk's registers, so that
    it serves the next launch of the same shape (``Chunk.acquire``)? A register-only
    instruction's does; so does a load's or store's through a register's address, and
    ``ld.param``'s (it reads the launch's arguments when it runs): memory, counters and
    findings are the chunk's launch's when it runs (``chunk.m``). Special registers and
    symbols are read when an executor is built, so an instruction naming one is not portable."""
    if ins.op in ("ld", "ldu", "st") and isinstance(ins.operands[0 if ins.op == "st" else 1], Addr):
        address = ins.operands[0 if ins.op == "st" else 1]
        rest = [o for o in ins.operands if o is not address]
        if "param" in ins.mods:
            return ins.op != "st" and type(address.base) is Sym and _registers_only(rest)
        return type(address.base) is Reg and _registers_only(rest)
    return kind == PURE and _registers_only(ins.operands)


def placed(kind: int, ins: Instr) -> bool:
    """Does the executor of ``ins`` hold nothing of a launch but its chunk's registers and the
    special registers its blocks fix (``special.PLACED``: ``%tid``, ``%ctaid``, ...), so that it
    serves the next launch of the same shape that runs the same blocks of the same grid
    (``Chunk.acquire``)? A register-only instruction that reads such special registers does
    (``mov.u32 %r1, %tid.x``, which a small launch built anew), as a portable one does."""
    return kind == PURE and _registers_only(ins.operands, PLACED)


def _registers_only(operands, special: frozenset[str] = frozenset()) -> bool:
    """Are ``operands`` registers and immediates, or the special registers ``special`` names?"""
    items = [item for o in operands for item in (o.items if isinstance(o, Vec) else (o,))]
    return all(type(o) is Reg or type(o) is Imm or (type(o) is Sreg and o.name in special) for o in items)


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
