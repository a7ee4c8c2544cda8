"""The emulator's fast paths give the results of its general ones.

Converged lanes run an instruction without lane lists, and the same instruction later runs
for some lanes alone (``ops.every_lane`` builds that path when first needed); a barrier
every lane of the chunk reaches is released without the per-block analysis
(``barriers._all_at_one_barrier``); shared-memory reads check an interval's words in one
reduction and writes look for earlier writers only when some word has one (``shadow.py``);
vector loads gather whole vectors; the bank model memoises a request's or a partial warp's
pattern. Each test also runs its kernel with a planted bug and sees the emulator catch it.
"""

from __future__ import annotations

import numpy as np
import pytest

from autograder.backends.compiler import compile_ptx
from autograder.contract import Buffer, Program, Scalar
from autograder.emulator import access
from autograder.emulator.counters import BankModel
from autograder.emulator.machine import decoded_kernel

from .helpers import kinds, launch, out
from .test_profile import direct_wavefronts

PLANTED = ((), (("PLANTED_BUG", 1),))

TRIPS = r"""
// Each thread runs its own number of trips of a loop: the body runs for every lane at once,
// then for the lanes still in the loop alone. PLANTED_BUG: one trip too many.
extern "C" __global__ void trips(const float* x, const int* n, float* y, int* c) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[t];
    int k = t;
#ifdef PLANTED_BUG
    for (int i = 0; i <= n[t]; ++i) {
#else
    for (int i = 0; i < n[t]; ++i) {
#endif
        a = fmaf(a, 0.75f, 0.5f);
        k = k * 3 + i;
        if (a > 1.0f) k ^= 5;
    }
    y[t] = a;
    c[t] = k;
}
"""


def trips_reference(x: np.ndarray, n: np.ndarray):
    """fmaf rounds once: a float32 times 0.75 plus 0.5 is exact in float64, rounded once."""
    a, k = x.copy(), np.arange(x.size, dtype=np.int64)
    for i in range(int(n.max())):
        on = i < n
        a = np.where(on, (a.astype(np.float64) * 0.75 + 0.5).astype(np.float32), a)
        k = np.where(on, (k * 3 + i) & 0xFFFFFFFF, k)
        k = np.where(on & (a > 1.0), k ^ 5, k)
    return a, k.astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("defines", PLANTED)
def test_an_instruction_run_by_every_lane_then_by_some_matches_numpy(rng, defines):
    size = 256
    x = (rng.standard_normal(size) * 4).astype(np.float32)
    n = rng.integers(4, 16, size).astype(np.int32)  # one trip of the 4-way unrolled loop for all
    result = launch(
        TRIPS,
        "trips",
        2,
        128,
        [Buffer("x", x), Buffer("n", n), out("y", size), out("c", size, np.int32)],
        defines=defines,
    )
    want_y, want_c = trips_reference(x, n)
    same = np.array_equal(result.outputs["y"], want_y) and np.array_equal(result.outputs["c"], want_c)
    assert result.findings == []
    assert same == (not defines)  # exact: the reference rounds as fmaf does, and wraps as int does


THREAD_ZERO = r"""
// Thread 0 writes the one word every thread then reads (volatile: in program order); thread
// 32 rewrites it with another value. PLANTED_BUG: no barrier after thread 0's write.
extern "C" __global__ void thread_zero(float* y) {
    __shared__ float word[1];
    volatile float* s = word;
    if (threadIdx.x == 0) s[0] = 1.0f;
#ifndef PLANTED_BUG
    __syncthreads();
#endif
    y[threadIdx.x] = s[0];
    __syncthreads();
    if (threadIdx.x == 32) s[0] = 2.0f;
    __syncthreads();
    y[64 + threadIdx.x] = s[0];
}
"""


@pytest.mark.parametrize("defines", PLANTED)
def test_races_against_thread_0s_write_are_found(defines):
    result = launch(THREAD_ZERO, "thread_zero", 1, 64, [out("y", 128)], defines=defines)
    if not defines:
        assert result.findings == []
        np.testing.assert_array_equal(result.outputs["y"], np.repeat([1.0, 2.0], 64))
        return
    # thread 0's id is 0: the shadow word it leaves is 0, one above CLEAN
    assert kinds(result) == ["shared_race"]
    message = result.findings[0].message
    assert "thread (1,0,0) of block (0,0,0) read word[0]" in message
    assert "thread (0,0,0) wrote" in message and "read-after-write" in message


OVERWRITE = r"""
// Thread 0, then thread 32, write one word with different values (volatile: two stores, in
// program order). PLANTED_BUG: no barrier between the two writes.
extern "C" __global__ void overwrite(float* y) {
    __shared__ float word[1];
    volatile float* s = word;
    if (threadIdx.x == 0) s[0] = 1.0f;
#ifndef PLANTED_BUG
    __syncthreads();
#endif
    if (threadIdx.x == 32) s[0] = 2.0f;
    __syncthreads();
    y[threadIdx.x] = s[0];
}
"""


@pytest.mark.parametrize("defines", PLANTED)
def test_a_write_over_thread_0s_write_is_found(defines):
    result = launch(OVERWRITE, "overwrite", 1, 64, [out("y", 64)], defines=defines)
    np.testing.assert_array_equal(result.outputs["y"], np.full(64, 2.0, np.float32))
    if not defines:
        assert result.findings == []
        return
    assert kinds(result) == ["shared_race"]
    message = result.findings[0].message
    assert "thread (32,0,0) of block (0,0,0) wrote word[0]" in message
    assert "thread (0,0,0) wrote" in message and "write-after-write" in message


NEIGHBOUR = r"""
// Every thread writes its word, then reads its right neighbour's (the last one wraps to 0).
// PLANTED_BUG: the last thread writes nothing, so thread 62 reads a word no thread wrote.
extern "C" __global__ void neighbour(float* y) {
    __shared__ float s[64];
    int t = threadIdx.x;
#ifdef PLANTED_BUG
    if (t != 63)
#endif
        s[t] = 10.0f * t;
    __syncthreads();
    y[t] = s[(t + 1) % 64];
}
"""


@pytest.mark.parametrize("defines", PLANTED)
def test_one_uninitialised_word_among_clean_ones_is_found(defines):
    result = launch(NEIGHBOUR, "neighbour", 1, 64, [out("y", 64)], defines=defines)
    want = np.roll(np.arange(64, dtype=np.float32) * 10, -1)
    if not defines:
        assert result.findings == []
        np.testing.assert_array_equal(result.outputs["y"], want)
        return
    assert kinds(result) == ["uninitialized_shared_read"]
    assert "thread (62,0,0)" in result.findings[0].message
    np.testing.assert_array_equal(result.outputs["y"][:62], want[:62])


BARRIERS = r"""
// Every thread of every block reaches each barrier; __syncthreads_count counts a block's
// positive inputs. Each thread reads its left neighbour's input, and after a barrier its
// right neighbour overwrites it. PLANTED_BUG: threads past the first warp return before the
// second barrier.
extern "C" __global__ void neighbours(const float* x, float* y) {
    __shared__ float s[128];
    int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    s[t] = x[g];
    int positive = __syncthreads_count(x[g] > 0.0f);
    float left = s[(t + 127) % 128];
#ifdef PLANTED_BUG
    if (t >= 32) return;
#endif
    __syncthreads();
    s[t] = 2.0f * left;
    __syncthreads();
    y[g] = s[(t + 1) % 128] + positive;
}
"""


@pytest.mark.parametrize("defines", PLANTED)
def test_barriers_every_lane_reaches_release_counts_and_clear_the_shadow(rng, defines):
    blocks = 3
    x = rng.standard_normal(128 * blocks).astype(np.float32)
    result = launch(BARRIERS, "neighbours", blocks, 128, [Buffer("x", x), out("y", x.size)], defines=defines)
    if defines:
        assert "barrier_divergence" in kinds(result)
        return
    positive = (x.reshape(blocks, 128) > 0).sum(axis=1)
    want = 2.0 * x + np.repeat(positive, 128)  # exact: small integers plus doubled floats
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["y"], want.astype(np.float32))
    assert result.counters.totals["barriers"] == 3 * blocks  # each block once per barrier


VECTORS = r"""
// Each thread loads a float4 from global memory and one from shared memory and writes their
// components reversed. PLANTED_BUG: it reads its neighbour's vector from shared memory.
extern "C" __global__ void reverse(const float4* x, float* y) {
    __shared__ float4 s[64];
    int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
#ifdef PLANTED_BUG
    float4 a = x[t], b = s[(t + 1) % 64];
#else
    float4 a = x[t], b = s[63 - t];
#endif
    float* row = y + 8 * t;
    row[0] = a.w; row[1] = a.z; row[2] = a.y; row[3] = a.x;
    row[4] = b.w; row[5] = b.z; row[6] = b.y; row[7] = b.x;
}
"""


@pytest.mark.parametrize("defines", PLANTED)
def test_vector_loads_put_each_component_in_its_register(rng, defines):
    x = rng.standard_normal(256).astype(np.float32)
    result = launch(VECTORS, "reverse", 1, 64, [Buffer("x", x), out("y", 512)], defines=defines)
    vectors = x.reshape(64, 4)
    want = np.concatenate([vectors[:, ::-1], vectors[::-1, ::-1]], axis=1).reshape(-1)
    assert result.findings == []
    assert np.array_equal(result.outputs["y"], want) == (not defines)  # exact: copies


@pytest.mark.parametrize("per_lane", [1, 2, 4])
def test_wavefronts_of_some_lanes_of_one_warp_match_a_direct_count(rng, per_lane):
    model = BankModel({})
    for _ in range(30):
        lanes = np.sort(rng.choice(32, rng.integers(1, 33), replace=False))
        words = rng.integers(0, 8, lanes.size) * 32 + rng.integers(0, 3, lanes.size)  # conflicts
        words = words * per_lane
        warp = np.full(lanes.size, 5)
        for _ in range(2):  # the second time from the memo
            assert model.wavefronts(warp, words, False, per_lane) == direct_wavefronts(warp, words, per_lane)


def test_a_request_seen_before_counts_as_before(rng):
    model = BankModel({})
    warps = np.repeat(np.arange(4), 32)
    first = rng.integers(0, 100, 128) * 2
    for words in (first, first + 7, rng.integers(0, 100, 128) * 2, first):
        for per_lane in (2, 1):  # the same pattern, read as 8- then 4-byte values
            want = direct_wavefronts(warps, words, per_lane)
            assert model.wavefronts(warps, words, True, per_lane) == want
            assert model.wavefronts(warps, words.astype(np.int32), True, per_lane) == want


MISALIGNED = r"""
// Each thread stores a float at byte 30 of its own 64 bytes: every store straddles two
// sectors. PLANTED_BUG: at byte 28, aligned, in one sector.
extern "C" __global__ void straddle(char* bytes) {
#ifdef PLANTED_BUG
    *reinterpret_cast<float*>(bytes + 64 * threadIdx.x + 28) = 1.0f;
#else
    *reinterpret_cast<float*>(bytes + 64 * threadIdx.x + 30) = 1.0f;
#endif
}
"""


@pytest.mark.parametrize("defines", PLANTED)
def test_misaligned_stores_count_every_sector_they_touch(defines):
    result = launch(MISALIGNED, "straddle", 1, 64, [out("bytes", 64 * 64, np.uint8)], defines=defines)
    assert result.counters.totals["global_store_sectors"] == (64 if defines else 128)
    assert kinds(result) == ([] if defines else ["misaligned_access"])


FMA_RUNS = r"""
// A 4-wide register tile updated K times (its fmas independent: one run each step), then a
// chain whose second fma reads the first's result (no run across them). PLANTED_BUG: the
// chain's second fma takes b where it takes a.
extern "C" __global__ void fma_runs(const float* x, float* y) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[t], b = x[t + 256];
    float acc[4] = {1.0f, 2.0f, 3.0f, 4.0f};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[j] = fmaf(a, b + j, acc[j]);
        a = fmaf(a, 0.5f, 0.25f);
    }
    float c = fmaf(a, b, acc[0]);
#ifdef PLANTED_BUG
    float d = fmaf(c, b, acc[1]);
#else
    float d = fmaf(c, a, acc[1]);
#endif
    y[t] = acc[2] + acc[3];
    y[t + 256] = d;
    // each of a and b times two registers, not the same two: no outer product
    float q0 = fmaf(a, b, acc[0]), q1 = fmaf(a, c, acc[1]), q2 = fmaf(b, a, acc[2]), q3 = fmaf(b, d, acc[3]);
    y[t + 512] = q0 + q1;
    y[t + 768] = q2 * q3;
}
"""


def fma_runs_reference(x: np.ndarray):
    def fmaf(p, q, r):  # an f32 product is exact in f64: one rounding, as fmaf
        return (p.astype(np.float64) * q + r).astype(np.float32)

    a, b = x[:256], x[256:]
    acc = [np.full(256, v, np.float32) for v in (1.0, 2.0, 3.0, 4.0)]
    for _ in range(8):
        acc = [fmaf(a, b + np.float32(j), acc[j]) for j in range(4)]
        a = fmaf(a, np.float32(0.5), np.float32(0.25))
    c = fmaf(a, b, acc[0])
    d = fmaf(c, a, acc[1])
    q = [fmaf(a, b, acc[0]), fmaf(a, c, acc[1]), fmaf(b, a, acc[2]), fmaf(b, d, acc[3])]
    return acc[2] + acc[3], d, q[0] + q[1], q[2] * q[3]


@pytest.mark.parametrize("defines", PLANTED)
def test_runs_of_independent_fmas_compute_as_one_at_a_time(rng, defines):
    x = rng.standard_normal(512).astype(np.float32)
    result = launch(FMA_RUNS, "fma_runs", 2, 128, [Buffer("x", x), out("y", 1024)], defines=defines)
    tile, chain, sums, products = fma_runs_reference(x)
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["y"][:256], tile)
    assert np.array_equal(result.outputs["y"][256:512], chain) == (not defines)  # bit for bit
    if not defines:
        np.testing.assert_array_equal(result.outputs["y"][512:768], sums)
        np.testing.assert_array_equal(result.outputs["y"][768:], products)


def test_a_run_of_fmas_stops_where_one_reads_what_an_earlier_one_wrote():
    compiled = compile_ptx(Program(FMA_RUNS, "kernel.cu", "fma_runs", ()))
    decoded = decoded_kernel(compiled.ptx, compiled.lowered_name, "kernel.cu")
    runs = decoded.fma_runs
    assert max(runs) >= 4  # the tile's update
    for k, span in enumerate(runs):
        written = set()
        for ins in decoded.program[k : k + span]:
            names = {o.name for o in ins.operands}
            assert ins.op == "fma" and not names & written
            written.add(ins.operands[0].name)


WALK = r"""
// Each step every thread reads the float 64 further on, in global and in shared memory: the
// same pattern of addresses from a new first address, its bounds and counts worked out once.
// With 6 steps (the planted bug) the last reads past the end of x and of the tile.
extern "C" __global__ void walk(const float* x, float* y, int steps) {
    __shared__ float tile[512];
    int t = threadIdx.x;
    tile[t] = x[t];
    tile[t + 256] = x[t + 256];
    __syncthreads();
    float s = 0.0f;
    for (int k = 0; k < steps; ++k) s += x[t + 64 * k] + tile[t + 64 * k];
    y[t] = s;
}
"""


@pytest.mark.parametrize("steps", [5, 6])
def test_a_memoised_pattern_of_addresses_is_bounds_checked_from_each_first_address(rng, steps):
    x = rng.standard_normal(512).astype(np.float32)
    result = launch(WALK, "walk", 1, 256, [Buffer("x", x), out("y", 256), Scalar("steps", np.int32(steps))])
    if steps == 5:
        assert result.findings == []
        want = sum(2 * x[np.arange(256) + 64 * k] for k in range(5))  # float32 sums, in order
        np.testing.assert_allclose(result.outputs["y"], want, rtol=1e-6)
        totals = result.counters.totals
        assert totals["shared_load_wavefronts"] == 5 * 8 and totals["shared_load_conflicts"] == 0
        assert totals["global_load_sectors"] == 2 * 32 + 5 * 32  # the tile's fill, then 5 steps
        return
    assert kinds(result) == ["out_of_bounds_read", "out_of_bounds_read"]
    read = sorted(f.message for f in result.findings)
    assert "thread (192,0,0) of block (0,0,0) read tile[512] past its end" in read[0]
    assert "thread (192,0,0) of block (0,0,0) read x[512] past its end" in read[1]


REUSE = r"""
// Launches of one shape run in the chunk the last one left, its registers zeroed and its
// portable executors kept (Chunk.acquire): each launch's arguments, inputs and findings are
// its own, and its __constant__ bias (at an address of its own) is read there.
__constant__ float bias[2] = {0.5f, 1.5f};
extern "C" __global__ void reuse(const float* x, float* y, float scale, int n) {
    __shared__ float tile[128];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    tile[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i % 256] = scale * tile[127 - t] + bias[blockIdx.x];
}
"""


def test_launches_of_one_shape_each_compute_as_a_fresh_process_would():
    def run(scale: float, n: int, size: int, seed: int):
        x = np.random.default_rng(seed).standard_normal(size).astype(np.float32)
        args = [Buffer("x", x), out("y", 256), Scalar("scale", scale, "float32"), Scalar("n", n)]
        result = launch(REUSE, "reuse", 2, 128, args)
        return result.outputs["y"].tobytes(), [f.message for f in result.findings], result.counters.totals

    launches = [(2.0, 256, 256, 1), (3.0, 200, 256, 2), (0.5, 256, 200, 3), (2.0, 256, 256, 1)]
    again = [run(*args) for args in launches]  # one chunk serves them all; the third reads past x
    assert again[0] == again[3] != again[1] and again[2][1] and not again[0][1] and not again[1][1]
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    want = 2 * x.reshape(2, 128)[:, ::-1] + np.array([[0.5], [1.5]], np.float32)
    np.testing.assert_array_equal(np.frombuffer(again[0][0], np.float32), want.reshape(-1))
    for args, result in zip(launches, again, strict=True):
        decoded_kernel.cache_clear()  # a fresh kernel: no chunk to serve it
        assert run(*args) == result


WIDE = r"""
// Products of two 32-bit values, exact in 64 bits (mul.wide.s32 and .u32), run by every lane
// at once. PLANTED_BUG: the signed product taken in 32 bits, then widened.
extern "C" __global__ void wide(const int* a, const int* b, long long* s, unsigned long long* u) {
    int t = threadIdx.x;
#ifdef PLANTED_BUG
    s[t] = (long long)(a[t] * b[t]);
#else
    s[t] = (long long)a[t] * b[t];
#endif
    u[t] = (unsigned long long)(unsigned)a[t] * (unsigned)b[t];
}
"""


@pytest.mark.parametrize("defines", PLANTED)
def test_wide_products_are_exact_in_64_bits(rng, defines):
    extremes = np.array([-(2**31), 2**31 - 1, -1, 0, 1, 65536, -65537, 46341], np.int32)
    a = np.concatenate([extremes, rng.integers(-(2**31), 2**31, 120, dtype=np.int64).astype(np.int32)])
    b = np.concatenate([extremes[::-1], rng.integers(-(2**31), 2**31, 120, dtype=np.int64).astype(np.int32)])
    args = [Buffer("a", a), Buffer("b", b), out("s", 128, np.int64), out("u", 128, np.uint64)]
    result = launch(WIDE, "wide", 1, 128, args, defines=defines)
    signed = a.astype(np.int64) * b.astype(np.int64)
    unsigned = a.view(np.uint32).astype(np.uint64) * b.view(np.uint32).astype(np.uint64)
    np.testing.assert_array_equal(result.outputs["u"], unsigned)
    assert np.array_equal(result.outputs["s"], signed) == (not defines)


def test_a_chunk_past_its_memo_budget_counts_and_checks_as_before(rng, monkeypatch):
    x = rng.standard_normal(512).astype(np.float32)
    for steps in (5, 6):  # in bounds, then reading past x and the tile on the last step
        args = [Buffer("x", x), out("y", 256), Scalar("steps", np.int32(steps))]
        remembered = launch(WALK, "walk", 1, 256, args)
        decoded_kernel.cache_clear()
        monkeypatch.setattr(access, "MEMO_BYTES", 0)  # no request resolved ahead
        alone = launch(WALK, "walk", 1, 256, args)
        monkeypatch.undo()
        decoded_kernel.cache_clear()
        assert alone.counters == remembered.counters and alone.findings == remembered.findings
        np.testing.assert_array_equal(alone.outputs["y"], remembered.outputs["y"])


def test_a_chunk_not_kept_is_freed_when_released_not_when_the_collector_runs(monkeypatch):
    """A launch's chunks are freed one by one as they end (``Chunk.release``): nothing of the
    chunk (its plan, registers, scheduler) holds it in a reference cycle, which would keep a
    large launch's chunks' arrays until the garbage collector ran and raise its peak memory."""
    import gc
    import weakref

    from autograder.emulator import chunk as chunk_module
    from autograder.emulator import machine

    monkeypatch.setattr(chunk_module, "SHELL_BYTES", -1)  # no chunk kept for the next launch
    monkeypatch.setattr(machine, "MAX_CHUNK_LANES", 128)  # one block a chunk
    chunks = []
    acquire = chunk_module.Chunk.acquire.__func__

    def recorded(cls, *args):
        made = acquire(cls, *args)
        chunks.append(weakref.ref(made))
        return made

    monkeypatch.setattr(chunk_module.Chunk, "acquire", classmethod(recorded))
    x = np.arange(512, dtype=np.float32)
    args = [Buffer("x", x), out("y", 256), Scalar("scale", 2.0, "float32"), Scalar("n", 256)]
    gc.disable()
    try:
        result = launch(REUSE, "reuse", 2, 128, args)
        alive = [ref for ref in chunks if ref() is not None]
    finally:
        gc.enable()
    assert len(chunks) == 2 and not alive and not result.findings
