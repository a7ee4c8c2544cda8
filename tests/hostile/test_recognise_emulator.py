"""A kernel must not be able to tell the grader's emulator from a GPU by its special
registers: one that behaves only when it believes it is checked (a clock that reads 0, one
SM, a timer at 0, the emulator's shared-memory layout) must run its unsafe branch on the
emulator too, as on a GPU, and lose the bounds item it would lose there."""

from __future__ import annotations

import pytest

from .conftest import assert_sound

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
}


@pytest.mark.parametrize("name", list(WATCHED))
def test_a_kernel_that_behaves_only_when_watched_is_caught(graded, name):
    result = graded({"vector_add.cu": TWO_FACED.replace("WATCHED", WATCHED[name])})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 4  # what lies inside the arrays is right
    assert result.score("bounds (safety)") == 0, result.item("bounds (safety)")["output"]
    assert "past its end" in result.item("bounds (safety)")["output"]
