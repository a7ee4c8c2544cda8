"""A small chunk kept for the next launch of its shape keeps the executors that read its blocks'
special registers (``machine.placed``: ``mov %r, %ctaid.x`` and the like) only while the next
launch runs the same blocks of the same grid: a launch at another place (the same number of
blocks in another grid, a later chunk of a launch) reads its own, as a fresh process would, and
what is drawn or counted per launch (``%smid``, ``%gridid``) is never kept."""

from __future__ import annotations

import numpy as np

from autograder.contract import Buffer, Scalar
from autograder.emulator import machine
from autograder.emulator.machine import decoded_kernel

from .helpers import launch, out

PLACES = r"""
#define R32(reg) ([] { unsigned v; asm volatile("mov.u32 %0, %%" reg ";" : "=r"(v)); return v; })()
extern "C" __global__ void places(unsigned* o) {
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned* r = o + 12 * (block * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x);
    r[0] = threadIdx.x; r[1] = threadIdx.y; r[2] = blockDim.x; r[3] = blockDim.y;
    r[4] = blockIdx.x; r[5] = blockIdx.y; r[6] = blockIdx.z; r[7] = gridDim.x;
    r[8] = gridDim.y; r[9] = R32("warpid"); r[10] = R32("laneid"); r[11] = R32("lanemask_lt");
}
"""

PER_LAUNCH = r"""
#define R32(reg) ([] { unsigned v; asm volatile("mov.u32 %0, %%" reg ";" : "=r"(v)); return v; })()
extern "C" __global__ void per_launch(unsigned long long* o) {
    unsigned long long gridid;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(gridid));
    o[2 * threadIdx.x] = gridid;
    o[2 * threadIdx.x + 1] = R32("smid");
}
"""


def _places(grid) -> bytes:
    n = int(np.prod(grid)) * 64
    return launch(PLACES, "places", grid, (32, 2), [out("o", 12 * n, np.uint32)]).outputs["o"].tobytes()


def test_launches_of_one_shape_at_other_places_read_their_own_special_registers():
    grids = [(4, 1, 1), (2, 2, 1), (1, 4, 1), (1, 2, 2), (4, 1, 1)]  # 4 blocks each: one shape
    decoded_kernel.cache_clear()
    kept = [_places(grid) for grid in grids]
    assert kept[0] == kept[-1] and len(set(kept)) == 4
    for grid, result in zip(grids, kept, strict=True):
        decoded_kernel.cache_clear()  # a fresh kernel: no chunk kept to serve it
        assert _places(grid) == result


def test_the_chunks_of_one_launch_each_read_their_own_blocks(monkeypatch):
    decoded_kernel.cache_clear()
    whole = _places((3, 2, 1))
    monkeypatch.setattr(machine, "MAX_CHUNK_LANES", 64)  # one block a chunk: each the kept one
    for _ in range(2):
        decoded_kernel.cache_clear()
        assert _places((3, 2, 1)) == whole
    table = np.frombuffer(whole, np.uint32).reshape(6, 64, 12)
    np.testing.assert_array_equal(table[:, 0, 4], [0, 1, 2, 0, 1, 2])  # blockIdx.x
    np.testing.assert_array_equal(table[:, 0, 5], [0, 0, 0, 1, 1, 1])  # blockIdx.y


def test_what_each_launch_draws_or_counts_is_not_kept():
    decoded_kernel.cache_clear()
    runs = [launch(PER_LAUNCH, "per_launch", 1, 32, [out("o", 64, np.uint64)]).outputs["o"] for _ in range(8)]
    gridids = [int(o[0]) for o in runs]
    assert gridids == list(range(gridids[0], gridids[0] + 8))  # one more each launch
    assert len({int(o[1]) for o in runs}) > 1  # a block's SM, drawn anew for each launch


LEFTOVERS = r"""
extern "C" __global__ void leftovers(unsigned* o, const unsigned* in, int k) {
    __shared__ unsigned s[64];
    volatile unsigned t[8];  // volatile: kept in local memory
    unsigned i = threadIdx.x;
    o[i] = s[i];  // what an earlier launch left here would show
    o[64 + i] = t[(i + k) % 8];
    s[i] = in[i];
    t[(i + k + 1) % 8] = in[i];
}
"""


def _leftovers(k: int):
    args = [out("o", 128, np.uint32), Buffer("in", np.arange(64, dtype=np.uint32) + 7 * k), Scalar("k", k)]
    result = launch(LEFTOVERS, "leftovers", 1, 64, args)
    return result.outputs["o"].tobytes(), [(f.kind, f.message) for f in result.findings]


def test_shared_and_local_memory_and_their_shadow_are_each_launchs_own():
    decoded_kernel.cache_clear()
    fresh = [_leftovers(k) for k in range(3)]
    assert len(fresh[0][1]) > 0  # the uninitialised shared read: a finding in every launch
    for k, result in enumerate(fresh):
        decoded_kernel.cache_clear()  # a fresh kernel: no chunk kept to serve it
        assert _leftovers(k) == result
