"""Special registers read what an H200 running the launch would read (``special.py``), so a
kernel cannot tell it is being checked: 132 SMs, blocks spread over them, 64 warp slots,
clocks that advance with the work and differ between SMs, a nanosecond timer since 1970, the
GPU's shared-memory sizes; registers the emulator does not emulate are named as such."""

from __future__ import annotations

import time

import numpy as np
import pytest

from autograder.contract import Scalar, Unsupported
from tests.emulator.helpers import launch, out

READ = r"""
#define R32(reg) ([] { unsigned v; asm volatile("mov.u32 %0, %%" reg ";" : "=r"(v)); return v; })()
#define R64(reg) ([] { unsigned long long v; asm volatile("mov.u64 %0, %%" reg ";" : "=l"(v)); return v; })()
"""

FIELDS = ("smid", "nsmid", "warpid", "nwarpid", "laneid", "gridid", "ctaid", "clusterid", "nclusterid")
IDS = (
    READ
    + r"""
extern "C" __global__ void ids(unsigned long long* o) {
    unsigned long long* r = o + 9 * (blockIdx.x * blockDim.x + threadIdx.x);
    r[0] = R32("smid"); r[1] = R32("nsmid"); r[2] = R32("warpid"); r[3] = R32("nwarpid");
    r[4] = R32("laneid"); r[5] = R64("gridid"); r[6] = blockIdx.x; r[7] = R32("clusterid.x");
    r[8] = R32("nclusterid.x") * 1000 + R32("cluster_nctarank") * 10 + R32("cluster_ctarank");
}
"""
)


def _ids(blocks: int, threads: int) -> dict[str, np.ndarray]:
    n = blocks * threads
    result = launch(IDS, "ids", blocks, threads, [out("o", 9 * n, np.uint64)])
    table = result.outputs["o"].reshape(n, 9)
    return {name: table[:, k] for k, name in enumerate(FIELDS)}


def test_the_launch_runs_on_132_sms_of_64_warp_slots():
    ids = _ids(264, 256)
    assert set(ids["nsmid"]) == {132} and set(ids["nwarpid"]) == {64}  # were 1 and 8


def test_blocks_are_spread_over_every_sm_in_pairs_of_one_tpc():
    ids = _ids(264, 64)
    sm = ids["smid"][::64]
    assert sorted(set(sm)) == list(range(132))  # was 0 for every block
    np.testing.assert_array_equal(sm[:132], sm[132:])  # round robin over the SMs
    assert (sm[0::2] % 2 == 0).all() and (sm[1::2] == sm[0::2] + 1).all()
    assert len(set(ids["smid"].reshape(264, 64).std(axis=1))) == 1  # one SM per block


def test_warpid_is_the_warps_slot_on_its_sm():
    ids = _ids(264, 256)
    warps = ids["warpid"].reshape(264, 8, 32)
    assert (warps == warps[:, :, :1]).all()  # one value per warp
    np.testing.assert_array_equal(warps[0, :, 0], np.arange(8))
    np.testing.assert_array_equal(warps[132, :, 0], np.arange(8, 16))  # was 0..7: the SM's 2nd block
    np.testing.assert_array_equal(ids["laneid"], np.tile(np.arange(256) % 32, 264))


def test_each_block_is_a_cluster_of_its_own():
    ids = _ids(5, 32)
    np.testing.assert_array_equal(ids["clusterid"], ids["ctaid"])  # was Unsupported: not declared
    assert set(ids["nclusterid"]) == {5 * 1000 + 1 * 10 + 0}


def test_gridid_counts_the_launches_of_the_process():
    first, second = _ids(1, 32)["gridid"], _ids(1, 32)["gridid"]
    assert first[0] >= 1 and second[0] == first[0] + 1  # was 0, twice


CLOCKS = (
    READ
    + r"""
extern "C" __global__ void clocks(unsigned long long* o, int iters) {
    unsigned long long t0 = clock64(), g0 = R64("globaltimer");
    unsigned lo = R32("clock"), hi = R32("clock_hi");
    unsigned long long t1 = clock64();
    float a = threadIdx.x;
    if (threadIdx.x % 64 == 0)
        for (int k = 0; k < iters; ++k) a = a * 1.0001f + 0.5f;
    unsigned long long t2 = clock64(), g1 = R64("globaltimer");
    unsigned long long* r = o + 8 * (blockIdx.x * blockDim.x + threadIdx.x);
    r[0] = t0; r[1] = t1; r[2] = t2; r[3] = g0; r[4] = g1; r[5] = lo; r[6] = hi;
    r[7] = R32("smid") + (a == -1.0f);
}
"""
)


def _clocks(blocks: int, threads: int, iters: int) -> np.ndarray:
    n = blocks * threads
    result = launch(CLOCKS, "clocks", blocks, threads, [out("o", 8 * n, np.uint64), Scalar("iters", iters)])
    return result.outputs["o"].reshape(n, 8).astype(np.int64)


def test_clock64_grows_with_the_instructions_a_thread_executes():
    short, long = _clocks(2, 128, 10), _clocks(2, 128, 1000)
    assert (short[:, 0] > 10**10).all()  # a GPU's uptime in cycles; was 0
    for r in (short, long):
        assert (r[:, 1] > r[:, 0]).all() and (r[:, 2] > r[:, 1]).all()  # never still, never back
        assert (r[:, 1] - r[:, 0] < 100).all()  # back to back: a few cycles
    # the lanes that loop 1000 times (one per 64) see thousands of cycles, as on a GPU
    work = long[::64, 2] - long[::64, 1]
    assert (work > 2000).all() and (work < 100_000).all()
    assert ((long[:, 2] - long[:, 1]).max()) > 10 * (short[:, 2] - short[:, 1]).max()


def test_clock64_differs_between_sms_and_between_launches():
    r = _clocks(132, 32, 10)
    starts = r[::32, 0]
    assert len(set(starts)) > 100 and np.ptp(starts) > 10_000
    assert abs(int(_clocks(1, 32, 10)[0, 0]) - int(r[0, 0])) > 1000


def test_clock_and_clock_hi_are_the_halves_of_clock64():
    r = _clocks(1, 32, 10)
    assert (r[:, 6] == r[:, 0] >> 32).all()  # the launch is far shorter than 2**32 cycles
    assert ((r[:, 5] - (r[:, 0] & 0xFFFFFFFF)) % 2**32 < 1000).all()  # read just after


def test_globaltimer_is_nanoseconds_since_1970_in_steps_of_32():
    before = time.time_ns()
    r = _clocks(2, 64, 1000)
    after = time.time_ns()
    assert ((r[:, 3] >= before - 10**9) & (r[:, 3] <= after)).all()  # was 0
    assert (r[:, 3] % 32 == 0).all() and (r[:, 4] >= r[:, 3]).all()
    assert (r[::64, 4] > r[::64, 3]).all()  # the looping lanes' timer moved


SHARED = (
    READ
    + r"""
extern "C" __global__ void sizes(unsigned* o) {
    __shared__ float s[250];
    extern __shared__ float d[];
    s[threadIdx.x] = threadIdx.x;
    d[threadIdx.x] = s[threadIdx.x];
    o[0] = R32("total_smem_size"); o[1] = R32("aggr_smem_size"); o[2] = R32("dynamic_smem_size");
    o[3] = d[0];
}
"""
)


def test_shared_memory_sizes_are_the_gpus_not_the_emulators_layout():
    # an H200 read 4096, 5032 and 3000 for 1000 static and 3000 dynamic bytes
    result = launch(SHARED, "sizes", 1, 32, [out("o", 4, np.uint32)], shared_bytes=3000)
    np.testing.assert_array_equal(result.outputs["o"][:3], [4096, 5032, 3000])  # total was 4480


PM = 'extern "C" __global__ void pm(unsigned* y) { asm volatile("mov.u32 %0, %%REG;" : "=r"(y[0])); }'


@pytest.mark.parametrize(
    ("source", "register", "feature"),
    [
        (PM.replace("REG", "pm3"), "%pm3", "performance monitor counters"),
        (PM.replace("REG", "envreg7"), "%envreg7", "environment registers"),
    ],
)
def test_a_special_register_not_emulated_is_named_with_its_feature(source, register, feature):
    with pytest.raises(Unsupported) as refused:
        launch(source, "pm", 1, 64, [out("y", 64, np.uint32)])
    message = str(refused.value)
    assert f"{register} (" in message and feature in message and "is not emulated" in message
    assert "not declared" not in message  # what it said before
    assert message.startswith("kernel.cu:")


INDICES = r"""
extern "C" __global__ void indices(unsigned* o) {
    unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned* r = o + 6 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
    r[0] = threadIdx.x; r[1] = threadIdx.y; r[2] = threadIdx.z;
    r[3] = blockIdx.x; r[4] = blockIdx.y; r[5] = blockIdx.z;
}
"""


# Every third lane reads the y and z axes under a partial mask, one variable carrying each value
# into the next (a register reused), the others writing nothing.
MASKED = r"""
extern "C" __global__ void masked(unsigned* o) {
    unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned* r = o + 6 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
    if (thread % 3 == 1) {
        unsigned v = threadIdx.y;
        r[1] = v;
        v = threadIdx.z + 64 * v;
        r[2] = v;
        v = blockIdx.y + 64 * v;
        r[4] = v;
        r[5] = blockIdx.z + 64 * v;
    }
}
"""

SHAPES = [((3, 2, 2), (8, 4, 2)), ((2, 3, 5), (16, 2, 3)), ((4, 1, 1), (7, 5, 1))]


@pytest.mark.parametrize("grid, block", SHAPES)
def test_indices_read_by_some_lanes_are_theirs_and_the_others_write_nothing(grid, block):
    """The y and z axes read under a partial mask (every third lane, ragged blocks): each lane's
    own, through a variable that carries one value into the next; the other lanes' words untouched."""
    threads, blocks = int(np.prod(block)), int(np.prod(grid))
    result = launch(MASKED, "masked", grid, block, [out("o", 6 * threads * blocks, np.uint32)])
    table = result.outputs["o"].reshape(blocks, threads, 6).astype(np.int64)
    tz, ty, _tx = np.unravel_index(np.arange(threads), block[::-1])
    bz, by, _bx = np.unravel_index(np.arange(blocks), grid[::-1])
    y, z = ty[None, :], tz[None, :]
    expected = {1: y + 0 * by[:, None], 2: z + 64 * y, 4: by[:, None] + 64 * (z + 64 * y)}
    expected[5] = bz[:, None] + 64 * expected[4]
    on = np.arange(threads) % 3 == 1
    for k, want in expected.items():
        assert (table[:, on, k] == np.broadcast_to(want, (blocks, threads))[:, on] % 2**32).all(), k
    assert (table[:, ~on] == 2**32 - 1).all() and (table[:, :, [0, 3]] == 2**32 - 1).all()


@pytest.mark.parametrize("grid, block", SHAPES)
def test_thread_and_block_indices_are_each_axis_of_their_linear_index(grid, block):
    """``special.dim_of`` works out one axis of a lane's thread or block: every axis of every lane
    of three-dimensional shapes, against numpy's own unravelling of the linear indices."""
    threads, blocks = int(np.prod(block)), int(np.prod(grid))
    result = launch(INDICES, "indices", grid, block, [out("o", 6 * threads * blocks, np.uint32)])
    table = result.outputs["o"].reshape(blocks, threads, 6)
    tz, ty, tx = np.unravel_index(np.arange(threads), block[::-1])
    bz, by, bx = np.unravel_index(np.arange(blocks), grid[::-1])
    for k, expected in enumerate((tx, ty, tz)):
        assert (table[:, :, k] == expected[None, :]).all()
    for k, expected in enumerate((bx, by, bz)):
        assert (table[:, :, 3 + k] == expected[:, None]).all()
