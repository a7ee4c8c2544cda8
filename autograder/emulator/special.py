"""PTX's special registers: what each reads in the emulator, as on an H200 (``sm_90``, 132
SMs) running the launch, so that no value tells a kernel it is being checked.

The values were read on an H200 (driver 580) with a 528-block launch of 256 threads and
1000 static + 3000 dynamic bytes of shared memory: ``%nsmid`` 132, ``%nwarpid`` 64,
``%gridid`` 1 then 2 for the process's first two launches, blocks handed to SMs in pairs
of one TPC (128 129 130 131 124 125 … 0 1 16 17 32 33 …), ``%warpid`` the warp's slot on
its SM (0..7 for the first block of each SM, 8..15 for a later one), ``%clock64`` about
4.3e10 with SMs apart by up to a few million cycles, 2 cycles between back-to-back reads
and about 5 per dependent ``fma`` for a lone warp (13 with 32 warps per SM), and
``%globaltimer`` the host's clock in nanoseconds, in steps of 32 ns, 2 cycles a
nanosecond (1.98 GHz); ``%total_smem_size`` 4096, ``%aggr_smem_size`` 5032,
``%reserved_smem_offset_end`` 288 and ``_cap`` 1024, ``%nclusterid.x`` 528,
``%cluster_nctarank`` 1.

Each register, and what it reads:

``%tid``, ``%ntid``, ``%ctaid``, ``%nctaid`` (``.x .y .z``)
    the thread's index in its block, the block's shape, the block's index, the grid's shape
``%laneid``
    the thread's lane: its linear index in the block, mod 32
``%lanemask_eq``, ``_le``, ``_lt``, ``_ge``, ``_gt``
    the lane's bit; the bits at or below it, below it, at or above it, above it
``%warpid``
    the warp's slot on its SM: (linear index / 32 + r * warps per block) mod 64, where r is
    the block's round on its SM (block / 132, modulo the blocks an SM holds at once)
``%nwarpid``
    64, the warp slots of an SM
``%smid``
    the block's SM: blocks go round the 132 SMs in a random order of TPCs (the SM pairs
    2t, 2t + 1), drawn anew for every launch
``%nsmid``
    132
``%gridid``
    1 for the process's first launch, then 2, 3, ...
``%clock64``
    cycles: the launch's start (a random uptime between 10 s and 30 min at 1.98 GHz) + the
    SM's offset (random: its TPC's, below 4 million, + its own, below 64) + the warp's
    (below 64) + the cycles of the launch's earlier chunks of blocks + the chunk's
    scheduler steps so far times the cycles per instruction (3 + the warps resident per
    SM / 6) + a random part below the cycles per instruction: it grows with the
    instructions executed and never goes back in a thread
``%clock``, ``%clock_hi``
    the low and the high 32 bits of ``%clock64``
``%globaltimer``
    nanoseconds: the host's clock (since 1970) when the launch began + the launch's cycles
    so far at 1.98 GHz, in steps of 32 ns
``%globaltimer_lo``, ``%globaltimer_hi``
    its low and high 32 bits
``%dynamic_smem_size``
    the launch's dynamic shared memory, in bytes
``%total_smem_size``
    the block's static and dynamic shared bytes as a GPU lays them out (the emulator's red
    zones are not counted), rounded up to 128
``%aggr_smem_size``
    the same, not rounded, + the 1 KiB an sm_90 reserves per block
``%is_explicit_cluster``
    false: each block is a cluster of its own, so ``%clusterid`` and ``%nclusterid``
    (``.x .y .z``) read ``%ctaid`` and ``%nctaid``, ``%cluster_ctaid`` 0,
    ``%cluster_nctaid`` 1, ``%cluster_ctarank`` 0 and ``%cluster_nctarank`` 1
``%current_graph_exec``
    0: the kernel was not launched from a CUDA graph
``%envreg1``, ``%envreg2``
    the high and the low half of the grid workspace's address (``cooperative_groups``'
    ``this_grid()`` reads them): a cooperative launch's (``barriers.GridBarrier``), else 0,
    so that ``is_valid()`` is false and ``grid.sync()`` traps, as on a GPU
``%reserved_smem_offset_begin``, ``_end``, ``_cap``, ``_0``, ``_1``
    the block's reserved shared memory (what sm_80 and later set aside for the system
    software; cooperative groups keep the barriers and the exchange slots of tiles of
    more than 32 threads there, at ``_1``): shared-window addresses of its start, of the
    end of its part in use, and of its two offsets, and its size, laid out as an H200
    lays them (measured: 0, 288, 0, 0 and 1024, the kernel's own shared variables from
    1024 on), where an H200 has it: a region the emulator allocates at offset 0 of the
    window, for a kernel that reads one of them (``reserved_shared``), 768 bytes long so
    that the 256 below offset 1024 stay a red zone: an access outside the region is out of
    bounds like any other, and the kernel's variables never overlap it

Not emulated (:class:`~autograder.emulator.isa.NotEmulated`, naming the feature, when the
instruction first runs): ``%pm0..7`` and ``%pm0_64..%pm7_64`` (performance monitor
counters), ``%envreg0``, ``%envreg3..31`` (driver-defined environment registers).

Cost: the clock registers are computed when an instruction reads them (``ops`` makes such
an instruction a ``SIDE`` one, so the scheduler hands its step count over before it runs);
the others once per chunk. Nothing here runs per instruction."""

from __future__ import annotations

import functools
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from autograder.device import DEVICES, SMEM_UNIT
from autograder.emulator.isa import NotEmulated, Sreg
from autograder.emulator.memory import FIRST_SHARED, RED_ZONE, RESERVED_REGION
from autograder.emulator.ptx import Variable

H200 = DEVICES["sm_90"]  # its per-SM limits, measured on the device (bench/results/occupancy.md)
SM_COUNT = H200.sms  # 132: %nsmid
WARP_SLOTS = H200.warps_per_sm  # 64 resident warps an SM holds: %nwarpid
BLOCK_SLOTS = H200.blocks_per_sm  # 32 resident blocks an SM holds
CLOCK_HZ = 1.98e9  # the H200's SM clock under load
TIMER_STEP_NS = 32  # %globaltimer's resolution
RESERVED_SMEM = FIRST_SHARED  # the 1 KiB sm_90 reserves per block (in %aggr_smem_size)
LONE_WARP_CPI = 3  # cycles per instruction of a warp alone on its SM (fits the measured loop)
SM_SPREAD = 4_000_000  # cycles between the SMs' clocks, at most
UPTIME_CYCLES = (20_000_000_000, 3_600_000_000_000)  # 10 s .. 30 min at 1.98 GHz
AXES = {"x": 0, "y": 1, "z": 2}
RESERVED = "%reserved_smem_offset_"
RESERVED_SMEM_OFFSETS = {"begin": 0, "end": 288, "0": 0, "1": 0}  # from its start, as an H200 reads them
NOT_EMULATED = {
    "%pm": "the performance monitor counters",
    "%envreg": "the driver-defined environment registers",
}
_launches = itertools.count(1)  # %gridid: launches of this process


@dataclass(frozen=True)
class ShapeRegisters:
    """The part of the special registers a launch's shape fixes (its grid, its block, its shared
    memory): the warps of a block, the blocks an SM holds, the cycles per instruction, the
    shared-memory sizes; worked out once per shape (``machine.Frame``), read-only."""

    warps_per_block: int
    blocks_per_sm: int
    cpi: int
    sizes: dict[str, np.uint32]

    @classmethod
    def of(cls, grid, block, used_smem: int, dynamic_smem: int) -> ShapeRegisters:
        warps_per_block = (math.prod(block) + 31) // 32
        per_sm = min(WARP_SLOTS, -(-math.prod(grid) // SM_COUNT) * warps_per_block)
        sizes = {
            "%dynamic_smem_size": np.uint32(dynamic_smem),
            "%total_smem_size": np.uint32(-(-used_smem // SMEM_UNIT) * SMEM_UNIT),
            "%aggr_smem_size": np.uint32(used_smem + RESERVED_SMEM),
        }
        blocks_per_sm = max(1, min(BLOCK_SLOTS, WARP_SLOTS // warps_per_block))
        return cls(warps_per_block, blocks_per_sm, LONE_WARP_CPI + per_sm // 6, sizes)


class LaunchRegisters:
    """The launch-wide part of the special registers: which SM runs each block, where each
    SM's clock stands, the timer's epoch, the shared-memory sizes (``shape``'s); and the cycles
    the launch's finished chunks took. Random draws are new for every launch (a student can
    neither predict nor seed them), as a GPU's values are; they are drawn when the kernel
    first reads a register that depends on them (most never do)."""

    def __init__(self, shape: ShapeRegisters):
        self.warps_per_block, self.blocks_per_sm = shape.warps_per_block, shape.blocks_per_sm
        self.cpi, self.sizes = shape.cpi, shape.sizes
        self.epoch_ns = time.time_ns()
        self.gridid = next(_launches)
        self.elapsed = 0  # cycles of the launch's finished chunks

    @functools.cached_property
    def rng(self) -> np.random.Generator:
        return np.random.default_rng()

    @functools.cached_property
    def sm_order(self) -> np.ndarray:
        pairs = self.rng.permutation(SM_COUNT // 2)
        return np.stack([2 * pairs, 2 * pairs + 1], axis=1).reshape(-1)

    @functools.cached_property
    def sm_start(self) -> np.ndarray:
        tpc = np.repeat(self.rng.integers(0, SM_SPREAD, SM_COUNT // 2), 2)  # a TPC's SMs agree
        return self.rng.integers(*UPTIME_CYCLES) + tpc + self.rng.integers(0, 64, SM_COUNT)

    def chunk_done(self, steps: int) -> None:
        """A chunk of blocks ran ``steps`` scheduler steps: later chunks start after it."""
        self.elapsed += steps * self.cpi

    def smid(self, blocks: np.ndarray) -> np.ndarray:
        return self.sm_order[blocks % SM_COUNT]


# ----- per chunk ---------------------------------------------------------------------
def read(name: str, chunk):
    """The value of special register ``name`` for every lane of ``chunk`` (an array, or a
    scalar where all lanes read the same), computed once per chunk; not the clocks."""
    launch = chunk.m.special
    base, _, comp = name.partition(".")
    if comp:
        return _component(base, AXES[comp], chunk)
    if name in launch.sizes:
        return launch.sizes[name]
    if name.startswith(RESERVED):
        return _reserved(name.removeprefix(RESERVED))
    if name in _WORKSPACE:
        return _WORKSPACE[name](chunk)
    for prefix, feature in NOT_EMULATED.items():
        if name.startswith(prefix):
            raise NotEmulated(f"{name} ({feature}) is not emulated")
    return _UNSPLIT[name](chunk)


def reserved_shared(program) -> list[Variable]:
    """The block's reserved shared memory as a shared variable, for a kernel that reads
    where it lies (``memory.SharedLayout`` puts it at 0); none for any other kernel."""
    reads = any(type(o) is Sreg and o.name.startswith(RESERVED) for ins in program for o in ins.operands)
    return [Variable(RESERVED_REGION, "shared", "b8", FIRST_SHARED - RED_ZONE, 16)] if reads else []


def _reserved(what: str) -> np.uint32:
    if what == "cap":
        return np.uint32(RESERVED_SMEM)
    return np.uint32(RESERVED_SMEM_OFFSETS[what])  # the layout puts the region at 0


def _component(base: str, axis: int, chunk):
    m = chunk.m
    if base == "%tid":
        return dim_of(chunk.lane_tid, m.block, axis).astype(np.uint32)
    if base in ("%ctaid", "%clusterid"):
        return dim_of(chunk.block_linear, m.grid, axis).astype(np.uint32)[chunk.lane_slot]
    shapes = {"%ntid": m.block[axis], "%nctaid": m.grid[axis], "%nclusterid": m.grid[axis]}
    shapes |= {"%cluster_ctaid": 0, "%cluster_nctaid": 1}
    return np.uint32(shapes[base])


def _lane(chunk) -> np.ndarray:
    return (chunk.lane_tid % 32).astype(np.uint32)


def _below(chunk) -> np.ndarray:
    return (np.uint32(1) << _lane(chunk)) - np.uint32(1)


def _at_or_below(chunk) -> np.ndarray:
    return ((np.uint32(1) << _lane(chunk)) << np.uint32(1)) - np.uint32(1)


def _warpid(chunk) -> np.ndarray:
    launch = chunk.m.special
    rounds = (chunk.block_linear // SM_COUNT) % launch.blocks_per_sm
    slot = chunk.lane_tid // 32 + (rounds * launch.warps_per_block)[chunk.lane_slot]
    return (slot % WARP_SLOTS).astype(np.uint32)


def _workspace_half(shift: int):
    def half(chunk) -> np.uint32:
        grid = chunk.m.grid_barrier
        return np.uint32(((grid.workspace if grid else 0) >> shift) & 0xFFFFFFFF)

    return half


_WORKSPACE = {"%envreg1": _workspace_half(32), "%envreg2": _workspace_half(0)}  # high, low

_UNSPLIT = {  # the registers without .x .y .z
    "%laneid": _lane,
    "%lanemask_eq": lambda ch: np.uint32(1) << _lane(ch),
    "%lanemask_lt": _below,
    "%lanemask_le": _at_or_below,
    "%lanemask_gt": lambda ch: ~_at_or_below(ch),
    "%lanemask_ge": lambda ch: ~_below(ch),
    "%warpid": _warpid,
    "%nwarpid": lambda ch: np.uint32(WARP_SLOTS),
    "%smid": lambda ch: ch.m.special.smid(ch.block_linear).astype(np.uint32)[ch.lane_slot],
    "%nsmid": lambda ch: np.uint32(SM_COUNT),
    "%gridid": lambda ch: np.uint64(ch.m.special.gridid),
    "%is_explicit_cluster": lambda ch: np.bool_(False),
    "%cluster_ctarank": lambda ch: np.uint32(0),
    "%cluster_nctarank": lambda ch: np.uint32(1),
    "%current_graph_exec": lambda ch: np.uint64(0),
}


# The registers that read the same in every launch of a kernel that runs the same blocks of the
# same grid, in blocks of the same shape with the same dynamic shared memory (a chunk kept for the
# next launch of its shape, at the same place: ``chunk.Chunk.acquire``): an executor that read one
# serves that launch too. Not %smid (drawn for every launch), %gridid (counted), the clocks, nor
# the grid workspace (a cooperative launch's).
PLACED = frozenset(
    [
        f"{base}.{axis}"
        for base in ("%tid", "%ntid", "%ctaid", "%nctaid", "%clusterid", "%nclusterid")
        for axis in AXES
    ]
    + [f"{base}.{axis}" for base in ("%cluster_ctaid", "%cluster_nctaid") for axis in AXES]
    + ["%laneid", "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge"]
    + ["%warpid", "%nwarpid", "%nsmid", "%is_explicit_cluster", "%cluster_ctarank", "%cluster_nctarank"]
    + ["%current_graph_exec", "%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size"]
    + [RESERVED + what for what in (*RESERVED_SMEM_OFFSETS, "cap")]
)


# ----- the clocks --------------------------------------------------------------------
def clock_getter(name: str, chunk):
    """``get(idx)``: the clock register ``name`` (``isa.CLOCK_REGISTERS``) for lanes ``idx``
    (None: every lane), read now: ``chunk.steps`` is the scheduler's step count."""
    if name.startswith("%globaltimer"):
        return _halves(name, lambda idx: _timer(chunk))
    return _halves(name, lambda idx: _cycles(chunk, idx))


def _halves(name: str, get):
    if name in ("%clock", "%globaltimer_lo"):
        return lambda idx: np.asarray(get(idx)).astype(np.uint32)
    if name in ("%clock_hi", "%globaltimer_hi"):
        return lambda idx: (np.asarray(get(idx)) >> np.uint64(32)).astype(np.uint32)
    return get


def _cycles(chunk, idx) -> np.ndarray:
    launch = chunk.m.special
    start = _clock_start(chunk)
    start = start if idx is None else start[idx]
    now = launch.elapsed + chunk.steps * launch.cpi
    return start + np.uint64(now) + launch.rng.integers(0, launch.cpi, start.size, dtype=np.uint64)


def _clock_start(chunk) -> np.ndarray:
    """Per lane: its SM's clock when the launch began, with its warp's own offset."""
    start = chunk.clock_start
    if start is None:
        launch = chunk.m.special
        sm = launch.smid(chunk.block_linear)[chunk.lane_slot]
        skew = launch.rng.integers(0, 64, chunk.n_warps)[chunk.warp_of]
        start = chunk.clock_start = (launch.sm_start[sm] + skew).astype(np.uint64)
    return start


def _timer(chunk) -> np.uint64:
    launch = chunk.m.special
    ns = (launch.elapsed + chunk.steps * launch.cpi) * 1e9 / CLOCK_HZ
    return np.uint64((launch.epoch_ns + int(ns)) // TIMER_STEP_NS * TIMER_STEP_NS)


def dim_of(linear: np.ndarray, dims, axis: int) -> np.ndarray:
    """The ``axis`` (0: x, 1: y, 2: z) index of each of the ``linear`` indices into ``dims``, x
    fastest; the others' not worked out (a chunk of 65 536 lanes reading ``%tid.x`` spent four
    fifths of its millisecond on y and z)."""
    x, y, _z = dims
    if axis == 0:
        return linear % x
    if axis == 1:
        return (linear // x) % y
    return linear // (x * y)
