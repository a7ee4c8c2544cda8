"""Findings that were wrong or missing (issue 24): an atomic against a plain access races;
one store of one value by many lanes does not; a finding in an inlined helper names its
call; a barrier with a thread count orders only the warps that took part in it. Each on one
block of 64 threads (the small launch's memoised paths) and on a larger grid."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer

from .helpers import kinds, launch, line_of, out

GRIDS = (1, 40)  # 64 lanes (memoised requests, resolved shared addresses) and 2 560

ATOMIC = r"""
extern "C" __global__ void count(const int* x, int* y) {
    __shared__ int total;
    int t = threadIdx.x;
#if V == 1
    if (t == 0) total = 0;  // plain
    atomicAdd(&total, x[t]);  // atomic
#elif V == 2
    if (t == 0) total = 0;
    __syncthreads();
    atomicAdd(&total, x[t]);  // atomic
    if (t == 0) y[blockIdx.x] = total;  // plain
#elif V == 3
    if (t == 0) total = x[0];
    __syncthreads();
    int seen = total;  // plain
    atomicAdd(&total, seen);  // atomic
#elif V == 4
    if (t == 0) total = 0;
    __syncthreads();
    atomicAdd(&total, x[t]);  // plain
    if (t == 1) total = 5;  // atomic
#else
    if (t == 0) total = 0;
    __syncthreads();
    atomicAdd(&total, x[t]);
    __syncthreads();
    if (t == 0) y[blockIdx.x] = total;
#endif
    __syncthreads();
    y[blockIdx.x] = total;
}
"""


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize(
    ("variant", "what", "found_at", "other_at"),
    [
        (1, "atomic-after-write", "// atomic", "// plain"),
        (2, "read-after-atomic", "// plain", "// atomic"),
        (3, "atomic-after-read", "// atomic", "// plain"),
        (4, "write-after-atomic", "// atomic", "// plain"),
    ],
)
def test_an_atomic_and_a_plain_access_race_in_either_order(grid, variant, what, found_at, other_at):
    source = ATOMIC.split("#if V == 1")[0] + ATOMIC.split(f"V == {variant}\n")[1].split("#e")[0]
    source += "    __syncthreads();\n    y[blockIdx.x] = total;\n}\n"
    x = np.ones(64, np.int32)
    result = launch(source, "count", grid, 64, [Buffer("x", x), out("y", grid, np.int32)])
    races = [f for f in result.findings if f.kind == "shared_race"]
    assert len(races) == 1, result.findings
    (race,) = races
    assert f"({what} race)" in race.message and race.array == "total"
    assert race.line == line_of(source, found_at)
    assert f"at line {line_of(source, other_at)}" in race.message
    assert "put a barrier between them" in race.message


@pytest.mark.parametrize("grid", GRIDS)
def test_atomics_among_themselves_do_not_race(grid):
    x = np.arange(64, dtype=np.int32)
    result = launch(ATOMIC, "count", grid, 64, [Buffer("x", x), out("y", grid, np.int32)])
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["y"], x.sum())


SAME_VALUE = r"""
#include <cuda_pipeline.h>
extern "C" __global__ void flags(const float* x, float* y) {
    __shared__ float flag[2];
    int t = threadIdx.x;
    flag[1] = 0.0f;
#if V == 1
    if (t < 32) flag[0] = 1.0f;  // one warp, one value
#elif V == 2
    flag[0] = x[0];  // every warp, one value
#elif V == 3
    __pipeline_memcpy_async(&flag[0], &x[0], 4);  // one value, copied
    __pipeline_commit();
    __pipeline_wait_prior(0);
#elif V == 4
    if (t < 32) flag[0] = x[t];  // one warp, values of its own
#else
    if (t < 32) flag[0] = 1.0f;
    if (t >= 32) flag[0] = 2.0f;  // another warp, another value
#endif
    __syncthreads();
    y[blockIdx.x * 64 + t] = flag[0] + flag[1];
}
"""


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize(("variant", "race"), [(1, False), (2, False), (3, False), (4, True), (5, True)])
def test_one_store_of_one_value_is_no_race(grid, variant, race):
    x = np.arange(1, 65, dtype=np.float32)
    args = [Buffer("x", x), out("y", 64 * grid)]
    result = launch(SAME_VALUE, "flags", grid, 64, args, defines=(("V", str(variant)),))
    assert kinds(result) == (["shared_race"] if race else [])
    if race:
        assert "(write-after-write race)" in result.findings[0].message


HELPER = r"""
__device__ __noinline__ void load_tile(float* s, const float* x, int t) {
    s[t] = x[t];  // helper's line
}
__device__ __noinline__ float mirror(const float* s, int t) {
    return s[63 - t];  // read in helper
}
extern "C" __global__ void reverse(const float* x, float* y) {
    __shared__ float s[64];
    int t = threadIdx.x;
    load_tile(s, x + blockIdx.x * 64, t);  // the call
    y[blockIdx.x * 64 + t] = mirror(s, t);  // second call
}
"""


@pytest.mark.parametrize("grid", GRIDS)
def test_a_finding_in_a_helper_names_the_call(grid):
    x = np.arange(64 * grid, dtype=np.float32)
    result = launch(HELPER, "reverse", grid, 64, [Buffer("x", x), out("y", 64 * grid)])
    (race,) = result.findings
    read, call, second = (line_of(HELPER, m) for m in ("read in helper", "the call", "second call"))
    assert race.line == read
    assert race.message.startswith(f"kernel.cu:{read} (in helper `mirror`, called from line {second}): ")
    written = line_of(HELPER, "helper's line")
    assert f"at line {written} (in helper `load_tile`, called from line {call})" in race.message


NAMED = r"""
#define SYNC(b) asm volatile("bar.sync " #b ", %0;" :: "n"(PAIR))
#define ARRIVE(b) asm volatile("bar.arrive " #b ", %0;" :: "n"(PAIR))
extern "C" __global__ void pairs(const float* x, float* y) {
    __shared__ float s[128];
    int t = threadIdx.x;
    int base = t / PAIR * PAIR;  // the first thread of this thread's pair of warps
    s[t] = x[blockIdx.x * 128 + t];
#if ARRIVE_FIRST
    if (t < 32) {
        ARRIVE(1);  // producer
        s[t] = 0.0f;  // after arriving
    } else if (t < 64) {
        SYNC(1);  // consumer
        y[blockIdx.x * 128 + t] = s[t - 32];  // read
    }
#else
    if (t < PAIR) SYNC(1);  // named barrier
    else SYNC(2);
    y[blockIdx.x * 128 + t] = s[READ];  // read
#endif
}
"""


MIRROR = "base + (base + PAIR - 1 - t)"  # the mirror image within its pair of warps


def _named(grid, pair, read=MIRROR, arrive=False):
    x = np.arange(128 * grid, dtype=np.float32)
    defines = (("PAIR", str(pair)), ("READ", read), ("ARRIVE_FIRST", str(int(arrive))))
    return launch(NAMED, "pairs", grid, 128, [Buffer("x", x), out("y", 128 * grid)], defines=defines), x


@pytest.mark.parametrize("grid", GRIDS)
def test_a_named_barrier_orders_the_warps_that_took_part(grid):
    result, x = _named(grid, 64)  # two pairs of warps, barriers 1 and 2, each reads its own pair
    assert result.findings == []
    expected = x.reshape(-1, 2, 64)[:, :, ::-1].reshape(-1)
    np.testing.assert_array_equal(result.outputs["y"], expected)


@pytest.mark.parametrize("grid", GRIDS)
def test_a_named_barrier_does_not_order_the_warps_that_did_not(grid):
    result, _ = _named(grid, 64, "127 - t")  # each pair reads the other pair's words
    assert kinds(result) == ["shared_race"]
    assert result.findings[0].line == line_of(NAMED, "s[READ];  // read")
    assert "(read-after-write race)" in result.findings[0].message


@pytest.mark.parametrize("grid", GRIDS)
def test_a_warp_that_arrives_is_ordered_before_the_warp_that_waits(grid):
    result, _ = _named(grid, 64, arrive=True)
    races = [f for f in result.findings if f.kind == "shared_race"]
    (race,) = races  # the producer's store after arriving races with the consumer's read
    assert race.line in (line_of(NAMED, "after arriving"), line_of(NAMED, "s[t - 32];  // read"))
    assert "s[" in race.message


def test_a_whole_block_barrier_is_unchanged():
    result, x = _named(1, 128)  # bar.sync 1, 128 on a 128-thread block: every warp
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["y"], x[::-1])


INLINED_BY_NVRTC = r"""
__device__ void add_neighbour(float* s, int t) {
    s[t] += s[t + 1];  // races with the neighbour's write
}
extern "C" __global__ void k(const float* x, float* y) {
    __shared__ float s[65];
    int t = threadIdx.x;
    s[t] = x[t];
    if (t == 0) s[64] = 0.0f;
    __syncthreads();
    add_neighbour(s, t);  // the call
    __syncthreads();
    y[t] = s[t];
}
"""


def test_a_race_in_a_helper_nvrtc_inlined_names_its_call():
    """A plain __device__ helper (NVRTC inlines it: its lines come with .loc ... inlined_at)."""
    result = launch(INLINED_BY_NVRTC, "k", 1, 64, [Buffer("x", np.ones(64, np.float32)), out("y", 64)])
    races = [f for f in result.findings if f.kind == "shared_race"]
    call = line_of(INLINED_BY_NVRTC, "// the call")
    assert races and races[0].line == line_of(INLINED_BY_NVRTC, "// races")
    assert f"(in helper `add_neighbour`, called from line {call})" in races[0].message
