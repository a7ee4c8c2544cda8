"""What an H200 (``sm_90``) refuses, and the student's error for each, in CUDA's terms.

Every kernel meets ptxas for ``sm_90`` when it compiles (``compiler.compile_ptx``): whatever
ptxas refuses is the student's ``PtxasRefusal``, in ptxas's words. These limits it refuses
are worded here, in the emulator's own terms, from PTX that never met ptxas
(``compiler.compile_virtual``), and a local frame it accepts but a GPU cannot run; each a
:class:`CompileError` (:func:`check_kernel`):

- a local frame over 512 KiB per thread (CUDA's limit: NVRTC 13.5 and ptxas 13.0 accept
  one, as a stack frame; a GPU cannot run it, and emulating it would take gigabytes);
- over 48 KiB of ``__shared__`` variables per block (ptxas: "uses too much shared data
  (0x40000000 bytes, 0xc000 max)");
- over 64 KiB of ``__constant__`` variables (ptxas: "uses too much global constant data");
- a barrier number outside 0..15, or a constant thread count that is not a multiple of 32
  (ptxas: "Barrier number '20' out of range", "must be in multiple of warp size").

A launch the driver refuses, or the grader cannot hold, is a :class:`LaunchFailure`
(:func:`check_launch`, and :func:`check_function` for what the cubin says, :class:`Function`):
a block of more threads than the kernel's ``__launch_bounds__`` (the PTX's ``.maxntid``;
"invalid argument", measured on the H200) or than its registers allow (ptxas's count, a
warp's allocated 256 at a time, against the 64 K registers of a block: CUDA's "too many
resources requested for launch"); a grid or block over CUDA's limits; static and dynamic shared memory
together over the 227 KiB (232 448 bytes) a block can opt in to (``cudaFuncSetAttribute``
refuses 232 449, the launch fails with "invalid argument"); parameters that do not match the
assignment's arguments; ``__device__`` variables over the emulator's cap of 256 MiB (a grader
limit, documented as such: its worker's data is capped at ``limits.emulator_mb``, 2 GiB by
default, and each launch holds its own copy) or over the H200's memory (where loading the
module fails with ``CUDA_ERROR_OUT_OF_MEMORY``); a cooperative launch (``Launch.cooperative``)
of more blocks than the H200 holds at once (``co_resident_blocks``: 132 SMs times what one
holds by warps, block slots and shared memory; registers, which ptxas decides, are not
counted) is refused as CUDA refuses it, "too many blocks in cooperative launch". A barrier's
thread count is checked when the barrier is reached (``barriers.py``)."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

from autograder.contract import CompileError, Launch, LaunchFailure, Program
from autograder.device import DEVICES, REG_UNIT, occupancy
from autograder.emulator.isa import Imm, Instr, immediate_bits
from autograder.emulator.memory import local_bytes
from autograder.emulator.special import BLOCK_SLOTS, RESERVED_SMEM, SM_COUNT, WARP_SLOTS
from autograder.feedback import counted

MAX_LOCAL_BYTES = 512 << 10  # local memory per thread, CUDA's limit for compute capability 9.0
STATIC_SHARED_BYTES = 48 << 10  # __shared__ variables per block (ptxas's 0xc000)
SHARED_OPTIN_BYTES = 232_448  # static + dynamic shared memory per block, opted in (227 KiB)
CONSTANT_BYTES = 64 << 10  # the constant bank
MODULE_DATA_CAP = 256 << 20  # __device__ variables the emulator holds (a grader limit)
GPU_MEMORY_BYTES = 143_771 << 20  # an H200's memory, as nvidia-smi reports it
BARRIERS = 16  # named barriers per block
MAX_BLOCK_THREADS = 1024
SM90 = DEVICES["sm_90"]  # CUDA's occupancy rules for compute capability 9.0
SM_SHARED_BYTES = SM90.shared_per_sm  # 228 KiB an SM, of which each block reserves 1 KiB
H200 = "an H200 (sm_90)"


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def static_shared_bytes(variables) -> int:
    """The block's ``__shared__`` variables laid out as a GPU lays them (no red zones)."""
    size = 0
    for v in variables:
        if v.space == "shared" and not v.extern:
            size = _align(size, v.align) + v.size
    return size


def dynamic_shared_start(variables) -> int:
    """Where the ``extern __shared__`` array begins: after the static ones, aligned."""
    align = max((v.align for v in variables if v.space == "shared" and v.extern), default=1)
    return _align(static_shared_bytes(variables), align)


# ----- the kernel: ptxas's refusals ------------------------------------------------------
def check_kernel(variables, barriers: tuple[Instr, ...], source: Program) -> None:
    """Raise the :class:`CompileError` ptxas would for ``sm_90``, if any; ``barriers``: the
    kernel's block barriers (``is_block_barrier``), in program order."""
    _check_local_frame(variables, source)
    _check_static_shared(variables, source)
    _check_constants(variables, source)
    for ins in barriers:
        _check_barrier(ins, source)


def _check_local_frame(variables, source: Program) -> None:
    size = local_bytes(variables)
    if size > MAX_LOCAL_BYTES:
        raise CompileError(
            f"{source.filename}: error: kernel {source.kernel} needs {size:,} bytes "
            f"({size / 1024:,.0f} KiB) of local memory per thread for its local arrays, more than "
            f"the {MAX_LOCAL_BYTES // 1024} KiB of local memory CUDA allows a thread; keep large "
            "arrays in global or shared memory"
        )


def _check_static_shared(variables, source: Program) -> None:
    size = static_shared_bytes(variables)
    if size > STATIC_SHARED_BYTES:
        raise CompileError(
            f"{source.filename}: error: kernel {source.kernel} declares {size:,} bytes of "
            f"__shared__ memory per block; {H200} allows at most {STATIC_SHARED_BYTES:,} bytes "
            "(48 KiB) of static shared memory per block (ptxas refuses the kernel)"
        )


def _check_constants(variables, source: Program) -> None:
    size = sum(v.size for v in variables if v.space == "const")
    if size > CONSTANT_BYTES:
        raise CompileError(
            f"{source.filename}: error: the file declares {size:,} bytes of __constant__ "
            f"memory; a GPU has {CONSTANT_BYTES:,} bytes (64 KiB) of it (ptxas refuses the kernel)"
        )


def barrier_operands(ins: Instr):
    """(barrier number, thread count or None) of a ``bar``/``barrier`` instruction:
    ``bar.sync a{, b}``, ``bar.arrive a, b``, ``bar.red.op.type d, a{, b}, {!}c``."""
    operands = ins.operands[1:-1] if "red" in ins.mods else ins.operands
    return (operands[0] if operands else None), (operands[1] if len(operands) > 1 else None)


def immediate(operand: Imm) -> int:
    return int(immediate_bits(operand.text, ""))


def is_block_barrier(ins: Instr) -> bool:
    return ins.op in ("bar", "barrier") and "warp" not in ins.mods


def _check_barrier(ins: Instr, source: Program) -> None:
    if not is_block_barrier(ins):
        return
    number, count = barrier_operands(ins)
    where = f"{source.filename}:{ins.line}" if ins.line else source.filename
    if isinstance(number, Imm) and not 0 <= immediate(number) < BARRIERS:
        raise CompileError(
            f"{where}: error: barrier number {immediate(number)} is out of range: a block has "
            f"barriers 0 to {BARRIERS - 1} (ptxas refuses the kernel)"
        )
    if isinstance(count, Imm) and immediate(count) % 32:
        raise CompileError(
            f"{where}: error: a barrier for {counted(immediate(count), 'thread')}: the number of threads "
            "taking part in a barrier must be a multiple of the warp size, 32 (ptxas refuses "
            "the kernel)"
        )


# ----- the launch: the driver's refusals, and the grader's cap ----------------------------
def check_launch(variables, params, launch) -> None:
    """Raise the :class:`LaunchFailure` of a launch that cannot run, if any."""
    _check_geometry(tuple(launch.grid), tuple(launch.block))
    _check_parameters(params, launch)
    _check_dynamic_shared(variables, launch)
    _check_module_data(variables, launch.program)
    if launch.cooperative:
        _check_co_resident(variables, launch)


@dataclass(frozen=True)
class Function:
    """What the driver reads from a kernel's cubin before it launches it: ptxas's registers a
    thread, and the most threads a block may have by ``__launch_bounds__`` (None: unbounded)."""

    registers: int
    bound: int | None = None

    @classmethod
    def of(cls, ptx: str, lowered_name: str, registers: int) -> Function:
        """The entry ``lowered_name`` of ``ptx``, given ptxas's ``registers`` for it: its bound is
        the product of the ``.maxntid x, y, z`` NVRTC writes for ``__launch_bounds__(N)``."""
        entry = re.search(rf"\.entry\s+{re.escape(lowered_name)}\s*\([^)]*\)([^{{]*)\{{", ptx)
        maxntid = re.search(r"\.maxntid\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", entry[1]) if entry else None
        return cls(registers, int(np.prod([int(n) for n in maxntid.groups()])) if maxntid else None)

    @functools.cached_property
    def register_threads(self) -> int:
        """The most threads a block may have with this many registers a thread (worked out once
        per kernel: 32 occupancy calls were a tenth of a small launch)."""
        blocks = (32 * warps for warps in range(1, SM90.threads_per_block // 32 + 1))
        fit = [n for n in blocks if occupancy(SM90, n, registers=self.registers).limits["registers"]]
        return max(fit, default=0)


def check_function(function: Function, launch: Launch) -> None:
    """Raise the :class:`LaunchFailure` of a launch the driver refuses for what the kernel's cubin
    says (its launch bounds, its registers), if any."""
    _check_geometry(tuple(launch.grid), tuple(launch.block))
    threads = math.prod(launch.block)
    source = launch.program
    if function.bound is not None and threads > function.bound:
        raise LaunchFailure(
            f"{source.filename}: kernel {source.kernel} is declared __launch_bounds__({function.bound}), "
            f"so a GPU runs it in blocks of at most {counted(function.bound, 'thread')}, but "
            f"{_launched(launch)}: {H200} refuses the launch (CUDA error: invalid argument); make the "
            "bound at least the block size the handout gives"
        )
    most = function.register_threads
    if threads > most:
        raise LaunchFailure(
            f"{source.filename}: kernel {source.kernel} uses {counted(function.registers, 'register')} a "
            f"thread (ptxas for sm_90), and {H200} gives a block at most {SM90.registers_per_block:,} "
            f"registers, allocated to each warp {REG_UNIT} at a time: enough for blocks of at most "
            f"{counted(most, 'thread')}, but {_launched(launch)}: the launch is refused (CUDA error: "
            f"too many resources requested for launch); __launch_bounds__({threads}) makes ptxas fit "
            "the kernel's registers to such blocks"
        )


def _launched(launch: Launch) -> str:
    """How the launch's blocks are, as a refusal words them (only then: 1 µs a launch)."""
    threads = math.prod(launch.block)
    return f"the assignment launches it in blocks of {counted(threads, 'thread')} {tuple(launch.block)}"


def _check_geometry(grid, block) -> None:
    """Refuse launches a GPU refuses (CUDA's limits for compute capability 9.0)."""
    if min(*grid, *block) < 1:
        raise LaunchFailure(f"invalid launch: grid {grid} and block {block} must be positive")
    if math.prod(block) > MAX_BLOCK_THREADS or block[0] > 1024 or block[1] > 1024 or block[2] > 64:
        raise LaunchFailure(f"invalid launch: a block of {block} threads exceeds 1024 threads (or 64 in z)")
    if grid[1] > 65535 or grid[2] > 65535 or grid[0] > 2**31 - 1:
        raise LaunchFailure(f"invalid launch: grid {grid} is too large")


def _check_parameters(params, launch) -> None:
    if len(params) == len(launch.args):
        return
    names = ", ".join(arg.name for arg in launch.args)
    raise LaunchFailure(
        f"{launch.program.filename}: kernel {launch.program.kernel} takes {len(params)} "
        f"parameter{'s' if len(params) != 1 else ''} but the assignment launches it with "
        f"{len(launch.args)} argument{'s' if len(launch.args) != 1 else ''} ({names}): keep the "
        "starter file's signature"
    )


def _check_dynamic_shared(variables, launch) -> None:
    static = static_shared_bytes(variables)
    total = dynamic_shared_start(variables) + launch.shared_bytes
    if launch.shared_bytes and total > SHARED_OPTIN_BYTES:
        raise LaunchFailure(
            f"{launch.program.filename}: the launch asks for {launch.shared_bytes:,} bytes of "
            f"dynamic shared memory per block on top of the kernel's {static:,} bytes of "
            f"__shared__ variables; {H200} allows at most {SHARED_OPTIN_BYTES:,} bytes (227 KiB) "
            "of shared memory per block (CUDA error: invalid argument)"
        )


def co_resident_blocks(variables, launch) -> tuple[int, str]:
    """The blocks of ``launch`` an H200 holds at once, and the resource that bounds them: its
    SMs times the blocks one SM holds by threads, block slots and shared memory (CUDA's
    occupancy rules, ``backends/occupancy.py``). Registers are not counted (ptxas decides
    them, the emulator never meets it), so this is an upper bound for a kernel with many."""
    shared = static_shared_bytes(variables)
    if launch.shared_bytes:
        shared = dynamic_shared_start(variables) + launch.shared_bytes
    held = occupancy(SM90, int(np.prod(launch.block)), static_shared=shared)
    why = {
        "warps": f"an SM runs {WARP_SLOTS * 32:,} threads",
        "blocks": f"an SM holds {BLOCK_SLOTS} blocks",
        "shared memory": f"an SM has {SM_SHARED_BYTES:,} bytes of shared memory and a block takes "
        f"{held.shared_per_block:,}, with the {RESERVED_SMEM:,} it reserves",
    }
    return SM_COUNT * held.blocks_per_sm, why[held.limiting[0]]


def _check_co_resident(variables, launch) -> None:
    blocks = int(np.prod(launch.grid))
    most, bound = co_resident_blocks(variables, launch)
    if blocks > most:
        threads = int(np.prod(launch.block))
        raise LaunchFailure(
            f"{launch.program.filename}: the cooperative launch of kernel {launch.program.kernel} "
            f"asks for {counted(blocks, 'block')} of {counted(threads, 'thread')}, but {H200} "
            f"holds at most {most:,} such blocks at once ({SM_COUNT} SMs x {most // SM_COUNT}: "
            f"{bound}), and every block of a cooperative launch must be resident together (CUDA "
            "error: too many blocks in cooperative launch)"
        )


def _check_module_data(variables, source: Program) -> None:
    size = sum(v.size for v in variables if v.space == "global")
    if size <= MODULE_DATA_CAP:
        return
    if size > GPU_MEMORY_BYTES:
        why = (
            f"more than the {GPU_MEMORY_BYTES:,} bytes of {H200}'s memory (loading the kernel "
            "fails with CUDA_ERROR_OUT_OF_MEMORY)"
        )
    else:
        why = (
            f"the grader's emulator, which checks bounds and barriers, holds at most "
            f"{MODULE_DATA_CAP:,} bytes (256 MiB) of them (a limit of this grader, not of a GPU)"
        )
    raise LaunchFailure(
        f"{source.filename}: the file's __device__ variables take {size:,} bytes, {why}; make them smaller"
    )
