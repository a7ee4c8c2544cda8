"""Theoretical occupancy (``backends/occupancy.py``): blocks per SM and the limiting resource.

Each expected figure is what CUDA's own calculator, ``cuda_occupancy.h``'s
``cudaOccMaxActiveBlocksPerMultiprocessor``, answers for the same device and kernel
(``bench/occupancy_check.py`` compares 10 890 configurations; these are some of them)."""

from __future__ import annotations

import pytest

from autograder.device import DEVICES, occupancy

W, B, S, R, BAR = "warps", "blocks", "shared memory", "registers", "barriers"
# arch, threads, registers, static shared, dynamic shared, barriers -> blocks per SM, each limit
CALCULATOR = [
    ("sm_90", 256, 32, 0, 0, 1, 8, {W: 8, B: 32, S: 228, R: 8, BAR: 64}),
    ("sm_90", 128, 168, 0, 71_680, 1, 3, {W: 16, B: 32, S: 3, R: 3, BAR: 64}),  # gemm_tensor_core
    ("sm_90", 1024, 64, 0, 0, 1, 1, {W: 2, B: 32, S: 228, R: 1, BAR: 64}),
    ("sm_90", 1024, 72, 0, 0, 1, 0, {W: 2, B: 32, S: 228, R: 0, BAR: 64}),  # 32 x 72 x 32 > 64 K
    ("sm_90", 96, 40, 0, 0, 1, 16, {W: 21, B: 32, S: 228, R: 16, BAR: 64}),  # 12 warps a sub-partition
    ("sm_90", 128, 37, 0, 0, 1, 12, {W: 16, B: 32, S: 228, R: 12, BAR: 64}),  # 1 184 -> 1 280 a warp
    ("sm_90", 256, 255, 0, 0, 1, 1, {W: 8, B: 32, S: 228, R: 1, BAR: 64}),
    ("sm_90", 32, 16, 0, 0, 3, 21, {W: 64, B: 32, S: 228, R: 128, BAR: 21}),  # 64 barriers an SM
    ("sm_90", 256, 32, 0, 231_425, 1, 1, {W: 8, B: 32, S: 1, R: 8, BAR: 64}),  # the most a block has
    ("sm_90", 64, 24, 3000, 5000, 1, 25, {W: 32, B: 32, S: 25, R: 42, BAR: 64}),  # 9 216 bytes a block
    ("sm_80", 256, 16, 49_152, 0, 1, 3, {W: 8, B: 32, S: 3, R: 16}),  # of 164 KiB
    ("sm_86", 512, 32, 0, 0, 1, 3, {W: 3, B: 16, S: 100, R: 4}),  # 1 536 threads an SM
    ("sm_89", 64, 16, 0, 0, 1, 24, {W: 24, B: 24, S: 100, R: 64}),
]


@pytest.mark.parametrize(
    ("arch", "threads", "regs", "static", "dynamic", "bars", "blocks", "limits"), CALCULATOR
)
def test_blocks_per_sm_and_each_limit_are_cudas(arch, threads, regs, static, dynamic, bars, blocks, limits):
    result = occupancy(DEVICES[arch], threads, static, dynamic, regs, bars)
    assert result.blocks_per_sm == blocks
    assert result.limits == limits
    assert result.limiting == tuple(k for k, v in limits.items() if v == blocks)


def test_occupancy_is_active_warps_over_the_sms_warp_slots():
    result = occupancy(DEVICES["sm_90"], 96, registers=40)
    assert result.warps_per_sm == 48
    assert result.fraction == 0.75


def test_a_block_over_the_shared_memory_a_block_may_have_does_not_launch():
    assert occupancy(DEVICES["sm_90"], 256, dynamic_shared=232_449).limits["shared memory"] == 0
    assert occupancy(DEVICES["sm_90"], 2048).blocks_per_sm == 0  # over 1 024 threads a block


def test_without_registers_the_register_limit_is_left_out():
    # the emulator never sees machine code: its co-resident bound counts threads, slots, shared memory
    result = occupancy(DEVICES["sm_90"], 256, static_shared=4096)
    assert set(result.limits) == {"warps", "blocks", "shared memory"}
    assert result.blocks_per_sm == 8
