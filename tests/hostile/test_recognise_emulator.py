"""A kernel must not be able to tell the grader's emulator from a GPU by its special
registers or its addresses: one that behaves only when it believes it is checked (a clock
that reads 0, one SM, a timer at 0, the emulator's shared-memory layout, buffers at
multiples of 2**40) must run its unsafe branch on the emulator too, as on a GPU, and lose
the bounds item it would lose there. The kernels of ``watched/`` read what such a kernel
would; what holds of each on an H200 must hold on the emulator (``bench/device/watched.py``
shows both)."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.backends.emulator import EmulatorBackend
from autograder.contract import Buffer, Launch, Program, Scalar

from .conftest import assert_sound
from .watched import kernels

READ = r"""
__device__ unsigned long long sreg64(int which) {
    unsigned long long v;
    if (which == 0) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    else asm volatile("mov.u64 %0, %%gridid;" : "=l"(v));
    return v;
}
__device__ unsigned sreg32(int which) {
    unsigned v;
    if (which == 0) asm volatile("mov.u32 %0, %%nsmid;" : "=r"(v));
    else if (which == 1) asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(v));
    else asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(v));
    return v;
}
__device__ unsigned first_shared() {
    __shared__ float s[1];
    return (unsigned)__cvta_generic_to_shared(s);
}
"""
TWO_FACED = (
    READ
    + """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (WATCHED) {  // what the emulator read before: behave
        if (i < n) c[i] = a[i] + b[i];
    } else {  // on a GPU: no guard, the ragged last block reads and writes past the arrays
        c[i] = a[i] + b[i];
    }
}
"""
)
WATCHED = {
    "clock64 reads 0": "clock64() == 0",
    "clock reads 0": "clock() == 0",
    "two clock64 reads agree": "clock64() == clock64()",
    "one SM": "sreg32(0) == 1",
    "the timer reads 0": "sreg64(0) == 0",
    "grid 0": "sreg64(1) == 0",
    "a warp slot per warp of the block": "sreg32(1) == blockDim.x / 32",
    "the emulator's shared red zone": "sreg32(2) == 256",
    "a buffer at a multiple of 2**40": "(unsigned long long)a % (1ull << 40) == 0",
    "the first shared variable at 256": "first_shared() == 256",
}


@pytest.mark.parametrize("name", list(WATCHED))
def test_a_kernel_that_behaves_only_when_watched_is_caught(graded, name):
    result = graded({"vector_add.cu": TWO_FACED.replace("WATCHED", WATCHED[name])})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 4  # what lies inside the arrays is right
    assert result.score("bounds (safety)") == 0, result.item("bounds (safety)")["output"]
    assert "past its end" in result.item("bounds (safety)")["output"]


WATCHED_KERNELS = {kernel.name: kernel for kernel in kernels()}


@pytest.mark.parametrize("name", list(WATCHED_KERNELS))
def test_what_a_watching_kernel_reads_holds_on_a_gpu_too(name):
    kernel = WATCHED_KERNELS[name]
    result = EmulatorBackend().launch(kernel.launch())
    assert [f.kind for f in result.findings] == ([kernel.finding] if kernel.finding else [])
    values = kernel.read(result)
    wrong = [holds for holds, true in kernel.check(values).items() if not true]
    assert not wrong, (wrong, {key: hex(value) for key, value in values.items()})


def test_the_buffers_lie_elsewhere_on_every_launch():
    kernel = WATCHED_KERNELS["global_pointers"]
    placed = {tuple(kernel.read(EmulatorBackend().launch(kernel.launch())).values()) for _ in range(3)}
    assert len(placed) == 3


FAR = r"""
extern "C" __global__ void far(const float* a, const float* b, float* c, long long step) {
    c[threadIdx.x] = a[step + threadIdx.x];
}
"""


@pytest.mark.parametrize("gib", [-64, -4, 4, 64, 256])
def test_a_read_gibibytes_from_a_buffer_is_a_bounds_finding(gib):
    # buffers lie 4 GiB apart at least, in one TiB: such a read lands beside a or b, never in one
    step = (gib << 30) // 4
    data = np.arange(32, dtype=np.float32)
    args = (
        Buffer("a", data),
        Buffer("b", data),
        Buffer("c", np.zeros(32, np.float32), True),
        Scalar("step", step, "int64"),
    )
    for _ in range(3):
        result = EmulatorBackend().launch(Launch(Program(FAR, "far.cu", "far"), (1, 1, 1), (32, 1, 1), args))
        assert {f.kind for f in result.findings} == {"out_of_bounds_read"}
        assert np.isnan(result.outputs["c"]).all()
