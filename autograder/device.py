"""Theoretical occupancy: how many blocks of a kernel one SM holds at once, and what limits them.

CUDA's occupancy rules for compute capability 8.x and 9.x (the CUDA C Programming Guide's
table of per-SM limits; ``cuda_occupancy.h``, the header-only calculator CUDA ships, applies
the same rules, and ``bench/occupancy_check.py`` checks these figures against it and against
a GPU's own ``cuOccupancyMaxActiveBlocksPerMultiprocessor``). A block is held when each of
these has room for it, so the blocks per SM are the least of:

- **warps**: the SM's warp slots over the block's warps (threads rounded up to 32);
- **blocks**: the SM's block slots;
- **registers**: each warp's registers (per thread x 32) are allocated in units of 256; the
  register file is split into 4 sub-partitions that each hold whole warps, and a block
  whose warps (rounded up to a multiple of 4) would not fit the 64 K registers a block may
  use does not launch;
- **shared memory**: the block's static and dynamic shared memory plus the 1 KiB the driver
  reserves per block, rounded up to 128 bytes, against the SM's shared memory (the largest
  carve-out, which the driver picks by default); a block over the per-block limit (opt-in
  included, as the gpu backend opts in) does not launch;
- **barriers** (9.x): the SM's 2 barriers per block slot over the barriers a block uses.

Registers and barriers come from ptxas (``autograder/grading/resources.py``); without them (the
emulator never sees machine code) those two limits are left out and the figure is an
upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WARP = 32
REG_UNIT = 256  # registers are allocated to a warp in units of this many
SUB_PARTITIONS = 4
SMEM_UNIT = 128  # shared memory is allocated to a block in units of this many bytes
MAX_REGISTERS = 256  # per thread, as the allocator counts them (ptxas gives at most 255)


@dataclass(frozen=True)
class Device:
    """Per-SM limits of one compute capability (and its SM count, for whole-GPU figures)."""

    name: str
    arch: str  # "sm_90"
    sms: int
    threads_per_sm: int
    blocks_per_sm: int
    shared_per_sm: int  # bytes, the largest carve-out
    shared_per_block: int  # bytes a block may opt in to (dynamic included, reserved not)
    reserved_shared: int = 1024  # bytes the driver keeps per block (compute capability 8.0 on)
    registers_per_sm: int = 64 * 1024
    registers_per_block: int = 64 * 1024
    threads_per_block: int = 1024
    barriers_per_block_slot: int = 0  # 9.x: a block's barriers count against 2 per block slot

    @property
    def warps_per_sm(self) -> int:
        return self.threads_per_sm // WARP


DEVICES = {
    device.arch: device
    for device in (
        Device(
            "H100/H200 (compute capability 9.0)",
            "sm_90",
            132,
            2048,
            32,
            228 << 10,
            227 << 10,
            barriers_per_block_slot=2,
        ),
        Device("A100 (compute capability 8.0)", "sm_80", 108, 2048, 32, 164 << 10, 163 << 10),
        Device("A40 (compute capability 8.6)", "sm_86", 84, 1536, 16, 100 << 10, 99 << 10),
        Device("L40 (compute capability 8.9)", "sm_89", 142, 1536, 24, 100 << 10, 99 << 10),
    )
}


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int  # 0: the block cannot launch (``limits`` says why)
    warps_per_block: int
    device: Device
    limits: dict[str, int] = field(default_factory=dict)  # resource -> blocks it allows per SM
    shared_per_block: int = 0  # bytes allocated per block, reserved and rounding included

    @property
    def warps_per_sm(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def fraction(self) -> float:
        """Active warps over the SM's warp slots."""
        return self.warps_per_sm / self.device.warps_per_sm

    @property
    def limiting(self) -> tuple[str, ...]:
        """The resources that allow no more blocks than are held (the least of the limits)."""
        return tuple(name for name, blocks in self.limits.items() if blocks == self.blocks_per_sm)


def occupancy(
    device: Device,
    threads: int,
    static_shared: int = 0,
    dynamic_shared: int = 0,
    registers: int | None = None,
    barriers: int | None = None,
) -> Occupancy:
    """Blocks of ``threads`` threads one SM of ``device`` holds, with the limit of each resource
    (registers and barriers per block: ptxas's figures; None leaves that limit out)."""
    warps = -(-threads // WARP)
    shared = _round_up(static_shared + dynamic_shared + device.reserved_shared, SMEM_UNIT)
    limits = {
        "warps": device.warps_per_sm // warps if threads <= device.threads_per_block else 0,
        "blocks": device.blocks_per_sm,
        "shared memory": _shared_limit(device, shared, static_shared + dynamic_shared),
    }
    if registers is not None:
        limits["registers"] = _register_limit(device, warps, registers)
    if barriers and device.barriers_per_block_slot:
        limits["barriers"] = device.barriers_per_block_slot * device.blocks_per_sm // barriers
    return Occupancy(min(limits.values()), warps, device, limits, shared)


def _shared_limit(device: Device, allocated: int, requested: int) -> int:
    if requested > device.shared_per_block:
        return 0
    return device.shared_per_sm // allocated


def _register_limit(device: Device, warps: int, registers: int) -> int:
    per_warp = _round_up(registers * WARP, REG_UNIT)
    assumed = per_warp * _round_up(warps, SUB_PARTITIONS)  # whole sub-partitions' worth of warps
    if registers > MAX_REGISTERS or assumed > device.registers_per_block:
        return 0
    if per_warp == 0:
        return device.blocks_per_sm
    warps_per_partition = device.registers_per_sm // SUB_PARTITIONS // per_warp
    return warps_per_partition * SUB_PARTITIONS // warps


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit
