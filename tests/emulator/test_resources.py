"""Resources without a GPU (``autograder/grading/resources.py``): ptxas's report on NVRTC's cubin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.cli import main
from autograder.contract import Program
from autograder.grading.resources import kernel_resources, parse_report

# 48 live accumulators: over the 32 registers that __launch_bounds__(1024, 2) leaves a thread
SPILLS = r"""
extern "C" __global__ void BOUNDS spill(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[48];
    #pragma unroll
    for (int k = 0; k < 48; ++k) acc[k] = x[(i + 97 * k) % n];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
        #pragma unroll
        for (int k = 0; k < 48; ++k) acc[k] = acc[k] * acc[(k + r + 1) % 48] + x[(i + k + r) % n];
    }
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < 48; ++k) s += acc[k];
    y[i] = s;
}
"""

SHARED = r"""
extern "C" __global__ void tile(const float* x, float* y) {
    __shared__ float t[2][256];
    t[0][threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    t[1][threadIdx.x] = t[0][255 - threadIdx.x];
    asm volatile("bar.sync 1, 256;");
    y[threadIdx.x] = t[1][threadIdx.x];
}
"""


def resources(source: str, kernel: str, defines=(), arch: str = "sm_90"):
    return kernel_resources(Program(source, "kernel.cu", kernel, defines), arch)


def test_a_kernel_held_to_32_registers_spills_and_without_the_bound_it_does_not():
    bound = resources(SPILLS, "spill", (("BOUNDS", "__launch_bounds__(1024, 2)"),))
    assert bound.registers == 32
    assert bound.spill_stores > 0 and bound.spill_loads > 0
    assert bound.stack_frame >= 4 * 32  # the spilled values live in local memory
    free = resources(SPILLS, "spill", (("BOUNDS", ""),))
    assert free.registers > 32
    assert (free.spill_stores, free.spill_loads, free.stack_frame) == (0, 0, 0)


def test_static_shared_memory_and_named_barriers_are_counted():
    found = resources(SHARED, "tile")
    assert found.static_shared == 2 * 256 * 4
    assert found.barriers == 2  # barrier 0 (__syncthreads) and barrier 1
    assert found.occupancy(256).limits["barriers"] == 32  # 64 an SM, 2 a block


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89"])
def test_other_targets_are_selectable(arch):
    assert resources(SHARED, "tile", arch=arch).arch == arch


def test_an_unknown_target_is_refused_by_name():
    with pytest.raises(ValueError, match="sm_70"):
        resources(SHARED, "tile", arch="sm_70")


def test_the_report_of_the_kernel_is_read_not_of_another_entry():
    report = """ptxas info    : Compiling entry function 'other' for 'sm_90'
ptxas info    : Function properties for other
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 90 registers, used 0 barriers
ptxas info    : Compiling entry function 'mine' for 'sm_90'
ptxas info    : Function properties for mine
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 16 bytes cumulative stack size, 4096 bytes smem
"""
    found = parse_report(report, "mine", "sm_90")
    assert (found.registers, found.spill_stores, found.spill_loads) == (40, 8, 4)
    assert (found.stack_frame, found.static_shared, found.barriers) == (16, 4096, 1)
    with pytest.raises(ValueError, match="nothing for the kernel absent"):
        parse_report(report, "absent", "sm_90")


def test_profile_shows_the_references_resources_and_occupancy():
    root = Path(__file__).resolve().parents[2]
    outcome = CliRunner().invoke(
        main,
        [
            "profile",
            str(root / "reference/gemm_tensor_core.cu"),
            "--assignment",
            "gemm_tensor_core",
            "--json",
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.output)
    assert data["resources"]["arch"] == "sm_90" and data["resources"]["spill_stores"] == 0
    occupancy = data["occupancy"]
    assert (occupancy["threads_per_block"], occupancy["dynamic_shared_bytes"]) == (128, 71_680)
    assert occupancy["blocks_per_sm"] == 3 and "shared memory" in occupancy["limiting"]
    text = CliRunner().invoke(
        main, ["profile", str(root / "reference/vector_add.cu"), "--assignment", "vector_add"]
    )
    assert "Occupancy on H100/H200" in text.output and "no spills" in text.output
