"""Instruction semantics: atomics with collisions, warp collectives, conversions, integer and
approximate math, printf, and the message for PTX the emulator cannot run."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar, Unsupported

from .helpers import launch, out

ATOMICS = r"""
extern "C" __global__ void atomics(unsigned* counters, unsigned* old, int* extremes, unsigned* bits,
                                   unsigned* swapped, unsigned* shared_old) {
    __shared__ unsigned s[4];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < 4) s[threadIdx.x] = 0;
    __syncthreads();
    old[i] = atomicAdd(&counters[i % 4], 1u);
    atomicMax(&extremes[0], (i * 37) % 1001);
    atomicMin(&extremes[1], -((i * 53) % 997));
    atomicOr(&bits[0], 1u << (i % 32));
    atomicXor(&bits[1], 1u << (i % 7));
    atomicAnd(&bits[2], ~(1u << (i % 5)));
    swapped[i] = atomicExch(&bits[3], (unsigned)i);
    shared_old[i] = atomicAdd(&s[i % 4], 1u);
    atomicCAS(&bits[4], 0u, (unsigned)i + 1);
    atomicInc(&bits[5], 9u);
}
"""


def test_atomics_return_distinct_old_values_on_collisions():
    n = 256
    extremes = np.array([-1, 0], np.int32)
    bits = np.array([0, 0, 0xFFFFFFFF, 12345, 0, 0], np.uint32)
    result = launch(
        ATOMICS,
        "atomics",
        2,
        128,
        [
            Buffer("counters", np.zeros(4, np.uint32), True),
            out("old", n, np.uint32),
            Buffer("extremes", extremes, True),
            Buffer("bits", bits, True),
            out("swapped", n, np.uint32),
            out("shared_old", n, np.uint32),
        ],
    )
    o = result.outputs
    assert result.findings == []
    np.testing.assert_array_equal(o["counters"], [64, 64, 64, 64])
    for c in range(4):
        assert sorted(o["old"][c::4]) == list(range(64))
    idx = np.arange(n)
    assert o["extremes"][0] == ((idx * 37) % 1001).max()
    assert o["extremes"][1] == (-((idx * 53) % 997)).min()
    assert o["bits"][0] == 0xFFFFFFFF
    assert o["bits"][1] == np.bitwise_xor.reduce((1 << (idx % 7)).astype(np.uint32))
    assert o["bits"][2] == 0xFFFFFFFF & ~0x1F
    chain = sorted([*o["swapped"].tolist(), int(o["bits"][3])])
    assert chain == sorted([*range(n), 12345])  # every exchanged value seen exactly once
    for c in range(4):  # per block, each shared counter hands out 0..31
        assert sorted(o["shared_old"][c:128:4]) == list(range(32))
    assert 1 <= o["bits"][4] <= n
    assert o["bits"][5] == n % 10


WARP = r"""
extern "C" __global__ void warp(const int* x, int* down, int* up, int* bfly, int* idx, int* sub,
                                unsigned* ballot, int* all_any, unsigned* active, int* total) {
    int t = threadIdx.x;
    int v = x[t];
    down[t] = __shfl_down_sync(0xffffffffu, v, 3);
    up[t] = __shfl_up_sync(0xffffffffu, v, 5);
    bfly[t] = __shfl_xor_sync(0xffffffffu, v, 6);
    idx[t] = __shfl_sync(0xffffffffu, v, 7);
    sub[t] = __shfl_down_sync(0xffffffffu, v, 2, 8);
    ballot[t] = __ballot_sync(0xffffffffu, v > 0);
    all_any[t] = __all_sync(0xffffffffu, v > -1000) * 2 + __any_sync(0xffffffffu, v > 90);
    if (t % 3 == 0) active[t] = __activemask();
    total[t] = __reduce_add_sync(0xffffffffu, v);
}
"""


def test_warp_collectives(rng):
    n = 64
    x = rng.integers(-100, 100, n).astype(np.int32)
    names = ["down", "up", "bfly", "idx", "sub", "ballot", "all_any", "active", "total"]
    args = [Buffer("x", x)] + [
        out(name, n, np.uint32 if name in ("ballot", "active") else np.int32) for name in names
    ]
    o = launch(WARP, "warp", 1, n, args).outputs
    lane = np.arange(n) % 32
    base = np.arange(n) - lane
    np.testing.assert_array_equal(o["down"], x[np.where(lane + 3 < 32, np.arange(n) + 3, np.arange(n))])
    np.testing.assert_array_equal(o["up"], x[np.where(lane >= 5, np.arange(n) - 5, np.arange(n))])
    np.testing.assert_array_equal(o["bfly"], x[base + (lane ^ 6)])
    np.testing.assert_array_equal(o["idx"], x[base + 7])
    seg = lane % 8
    np.testing.assert_array_equal(o["sub"], x[np.where(seg + 2 < 8, np.arange(n) + 2, np.arange(n))])
    for w in range(2):
        warp_x = x[32 * w : 32 * w + 32]
        mask = int(sum(1 << k for k in range(32) if warp_x[k] > 0))
        assert (o["ballot"][32 * w : 32 * w + 32] == mask).all()
        assert (o["all_any"][32 * w : 32 * w + 32] == 2 + int((warp_x > 90).any())).all()
        assert (o["total"][32 * w : 32 * w + 32] == warp_x.sum()).all()
        expected = sum(1 << k for k in range(32) if k % 3 == (-32 * w) % 3)
        assert o["active"][32 * w + (-32 * w) % 3] == expected


CVT = r"""
extern "C" __global__ void conversions(const float* f, const double* d, int* i_rn, int* i_rz, int* i_rd,
                                       int* i_ru, unsigned* u_sat, float* from_double, float* from_int,
                                       unsigned short* half_bits, unsigned short* bf16_bits,
                                       float* half_back) {
    int t = threadIdx.x;
    i_rn[t] = __float2int_rn(f[t]);
    i_rz[t] = __float2int_rz(f[t]);
    i_rd[t] = __float2int_rd(f[t]);
    i_ru[t] = __float2int_ru(f[t]);
    u_sat[t] = __float2uint_rz(f[t]);
    from_double[t] = __double2float_rn(d[t]);
    from_int[t] = (float)(i_rz[t] * 3 + 1);
    unsigned short h, b;
    float back;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f[t]));
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f[t]));
    asm("cvt.f32.f16 %0, %1;" : "=f"(back) : "h"(h));
    half_bits[t] = h;
    bf16_bits[t] = b;
    half_back[t] = back;
}
"""


def test_conversions_round_as_asked():
    f = np.array([2.5, -2.5, 3.5, -0.4, 1e10, -1e10, np.nan, 7.75, 0.1, 65504.0, 1e-8, -3.0] * 4, np.float32)
    n = f.size
    d = np.linspace(-1e5, 1e5, n) / 3
    names = [
        ("i_rn", np.int32),
        ("i_rz", np.int32),
        ("i_rd", np.int32),
        ("i_ru", np.int32),
        ("u_sat", np.uint32),
        ("from_double", np.float32),
        ("from_int", np.float32),
        ("half_bits", np.uint16),
        ("bf16_bits", np.uint16),
        ("half_back", np.float32),
    ]
    o = launch(
        CVT, "conversions", 1, n, [Buffer("f", f), Buffer("d", d)] + [out(name, n, dt) for name, dt in names]
    ).outputs
    clean = np.nan_to_num(f.astype(np.float64), nan=0.0)
    info = np.iinfo(np.int32)
    np.testing.assert_array_equal(o["i_rn"], np.clip(np.rint(clean), info.min, info.max))
    np.testing.assert_array_equal(o["i_rz"], np.clip(np.trunc(clean), info.min, info.max))
    np.testing.assert_array_equal(o["i_rd"], np.clip(np.floor(clean), info.min, info.max))
    np.testing.assert_array_equal(o["i_ru"], np.clip(np.ceil(clean), info.min, info.max))
    np.testing.assert_array_equal(o["u_sat"], np.clip(np.trunc(clean), 0, 2**32 - 1).astype(np.uint32))
    np.testing.assert_array_equal(o["from_double"], d.astype(np.float32))
    with np.errstate(over="ignore"):  # 1e10 becomes inf in half precision, as on the GPU
        half = f.astype(np.float16)
    np.testing.assert_array_equal(o["half_bits"], half.view(np.uint16))
    np.testing.assert_array_equal(o["half_back"], half.astype(np.float32))
    finite = ~np.isnan(f)
    bf16 = (o["bf16_bits"].astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_allclose(bf16[finite], f[finite], rtol=2**-8)


INTEGER = r"""
extern "C" __global__ void integer(const int* a, const int* b, int* q, int* r, int* hi,
                                   unsigned long long* uhi, int* pop, int* lz, unsigned* rev, int* field,
                                   unsigned* shifted) {
    int t = threadIdx.x;
    int x = a[t], y = b[t];
    q[t] = x / y;
    r[t] = x % y;
    hi[t] = __mulhi(x, y);
    uhi[t] = __umul64hi(0x9E3779B97F4A7C15ull * (t + 1), 0xC2B2AE3D27D4EB4Full);
    pop[t] = __popc(x);
    lz[t] = __clz(x);
    rev[t] = __brev((unsigned)x);
    int f;
    asm("bfe.s32 %0, %1, 4, 7;" : "=r"(f) : "r"(x));
    field[t] = f;
    unsigned s;
    asm("shl.b32 %0, %1, %2;" : "=r"(s) : "r"(x), "r"(t));
    shifted[t] = s;
}
"""


def test_integer_semantics(rng):
    n = 40
    a = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    b = rng.integers(-1000, 1000, n).astype(np.int32)
    b[b == 0] = 7
    names = [
        ("q", np.int32),
        ("r", np.int32),
        ("hi", np.int32),
        ("uhi", np.uint64),
        ("pop", np.int32),
        ("lz", np.int32),
        ("rev", np.uint32),
        ("field", np.int32),
        ("shifted", np.uint32),
    ]
    o = launch(
        INTEGER, "integer", 1, n, [Buffer("a", a), Buffer("b", b)] + [out(name, n, dt) for name, dt in names]
    ).outputs
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    np.testing.assert_array_equal(o["q"], np.trunc(a64 / b64).astype(np.int64))
    np.testing.assert_array_equal(o["r"], a64 - np.trunc(a64 / b64).astype(np.int64) * b64)
    np.testing.assert_array_equal(o["hi"], (a64 * b64) >> 32)
    t = np.arange(1, n + 1, dtype=object)
    expected_uhi = [((0x9E3779B97F4A7C15 * int(k)) % 2**64 * 0xC2B2AE3D27D4EB4F) >> 64 for k in t]
    assert o["uhi"].tolist() == expected_uhi
    u = a.view(np.uint32)
    assert o["pop"].tolist() == [bin(int(v)).count("1") for v in u]
    assert o["lz"].tolist() == [32 - int(v).bit_length() for v in u]
    assert o["rev"].tolist() == [int(f"{int(v):032b}"[::-1], 2) for v in u]
    fields = ((u >> 4) & 0x7F).astype(np.int32)
    np.testing.assert_array_equal(o["field"], np.where(fields >= 64, fields - 128, fields))
    shifts = np.arange(n)
    wide = u.astype(np.uint64) << (shifts % 32).astype(np.uint64)
    expected = np.where(shifts >= 32, 0, wide & 0xFFFFFFFF)
    np.testing.assert_array_equal(o["shifted"], expected)


MATH = r"""
extern "C" __global__ void math(const float* x, float* out) {
    int t = threadIdx.x;
    float v = x[t];
    out[t * 8 + 0] = __fsqrt_rn(v);
    out[t * 8 + 1] = rsqrtf(v);
    out[t * 8 + 2] = __expf(v);
    out[t * 8 + 3] = __log2f(v);
    out[t * 8 + 4] = __sinf(v);
    out[t * 8 + 5] = __cosf(v);
    out[t * 8 + 6] = __frcp_rn(v);
    out[t * 8 + 7] = __fdividef(1.0f, v) + fminf(v, 2.0f) + fmaxf(v, 1.5f) + fabsf(-v);
}
"""


def test_approximate_math(rng):
    x = rng.uniform(0.1, 4.0, 64).astype(np.float32)
    o = launch(MATH, "math", 1, 64, [Buffer("x", x), out("out", 64 * 8)]).outputs["out"].reshape(64, 8)
    xd = x.astype(np.float64)
    expected = np.stack(
        [
            np.sqrt(xd),
            1 / np.sqrt(xd),
            np.exp(xd),
            np.log2(xd),
            np.sin(xd),
            np.cos(xd),
            1 / xd,
            1 / xd + np.minimum(xd, 2) + np.maximum(xd, 1.5) + xd,
        ],
        axis=1,
    )
    np.testing.assert_allclose(o, expected, rtol=2e-6, atol=2e-6)


PRINTF = r"""
extern "C" __global__ void hello(int n) {
    if (threadIdx.x < 2)
        printf("thread %d of %d: %5.2f %s %c%lld\n", threadIdx.x, n, 1.5 * threadIdx.x, "ok", 'x',
               123456789012ll);
}
"""


def test_printf_is_captured():
    result = launch(PRINTF, "hello", 1, 32, [Scalar("n", 32)])
    assert result.stdout == "thread 0 of 32:  0.00 ok x123456789012\nthread 1 of 32:  1.50 ok x123456789012\n"


UNSUPPORTED = r"""
extern "C" __global__ void odd(const float* x, unsigned* y) {
    unsigned v;
    asm("bmsk.clamp.b32 %0, %1, %1;" : "=r"(v) : "r"((unsigned)(size_t)x));  // not emulated
    y[threadIdx.x] = v;
}
"""


def test_unsupported_instruction_names_opcode_and_line():
    expected = r"bmsk\.clamp\.b32 is not supported by the emulator \(kernel.cu:4\)"
    with pytest.raises(Unsupported, match=expected):
        launch(UNSUPPORTED, "odd", 1, 32, [Buffer("x", np.ones(4, np.float32)), out("y", 32, np.uint32)])


DOUBLE_AND_CHUNKS = r"""
extern "C" __global__ void axpy(double a, const double* x, double* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_large_grid_runs_in_chunks(rng, monkeypatch):
    from autograder.emulator import machine

    monkeypatch.setattr(machine, "MAX_CHUNK_LANES", 1024)
    n = 10_000
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    result = launch(
        DOUBLE_AND_CHUNKS,
        "axpy",
        (n + 127) // 128,
        128,
        [Scalar("a", 2.5, "float64"), Buffer("x", x), Buffer("y", y, True), Scalar("n", n, "int64")],
    )
    fused = [
        float(Fraction(2.5) * Fraction(a) + Fraction(b)) for a, b in zip(x.tolist(), y.tolist(), strict=True)
    ]
    np.testing.assert_array_equal(result.outputs["y"], fused)  # a * x[i] + y[i] is one fma, rounded once
    assert result.counters.totals["global_load_values"] == 2 * n


HALF = r"""
#include <cuda_fp16.h>
extern "C" __global__ void halves(const __half* a, const __half* b, __half* sum, __half* fused,
                                  __half2* pairs) {
    int t = threadIdx.x;
    sum[t] = __hadd(a[t], b[t]);
    fused[t] = __hfma(a[t], b[t], a[t]);
    __half2 p = __halves2half2(a[t], b[t]);
    pairs[t] = __hmul2(p, __hadd2(p, p));
}
"""


def test_half_precision_arithmetic(rng):
    n = 64
    a = rng.uniform(-4, 4, n).astype(np.float16)
    b = rng.uniform(-4, 4, n).astype(np.float16)
    o = launch(
        HALF,
        "halves",
        1,
        n,
        [
            Buffer("a", a),
            Buffer("b", b),
            out("sum", n, np.float16),
            out("fused", n, np.float16),
            out("pairs", 2 * n, np.float16),
        ],
    ).outputs
    np.testing.assert_array_equal(o["sum"], a + b)
    np.testing.assert_array_equal(o["fused"], (a.astype(np.float64) * b + a).astype(np.float16))
    pairs = np.stack([a, b], axis=1)
    np.testing.assert_array_equal(o["pairs"].reshape(n, 2), pairs * (pairs + pairs))


BLOCK_VOTES = r"""
extern "C" __global__ void votes(const float* x, int* y, unsigned* z) {
    __shared__ float s[64];
    int t = threadIdx.x;
    int c = __syncthreads_count(x[t] > 0.5f);
    int a = __syncthreads_and(x[t] > 0.1f);
    int o = __syncthreads_or(x[t] > 0.9f);
    y[t] = c * 100 + a * 10 + o;
    z[t] = __ffs(t) + __ffsll((long long)t << 40) + __sad(t, 7, 1);
    unsigned sa = (unsigned)__cvta_generic_to_shared(&s[t]);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(sa), "l"(x + t));
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;");
    __syncthreads();
    z[t] += (unsigned)(s[(t + 1) % 64] * 1000.0f);
}
"""


def test_block_votes_bit_search_and_async_copies(rng):
    x = rng.random(64, np.float32)
    result = launch(
        BLOCK_VOTES, "votes", 1, 64, [Buffer("x", x), out("y", 64, np.int32), out("z", 64, np.uint32)]
    )
    assert result.findings == []
    expected = (x > 0.5).sum() * 100 + (x > 0.1).all() * 10 + (x > 0.9).any()
    np.testing.assert_array_equal(result.outputs["y"], expected)
    t = np.arange(64)
    ffs = np.array([(v & -v).bit_length() for v in t.tolist()])
    ffsll = np.array([((v << 40) & -(v << 40)).bit_length() for v in t.tolist()])
    copied = (x[(t + 1) % 64] * np.float32(1000)).astype(np.uint32)
    np.testing.assert_array_equal(result.outputs["z"], ffs + ffsll + np.abs(t - 7) + 1 + copied)


def test_a_launch_the_gpu_refuses_fails():
    from autograder.contract import LaunchFailure

    with pytest.raises(LaunchFailure, match="1024"):
        launch(PRINTF, "hello", 1, (64, 32), [Scalar("n", 1)])
