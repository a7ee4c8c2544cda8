"""Device functions NVRTC leaves as ``.func`` (``__noinline__``) run inlined by the emulator."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar, Unsupported
from tests.emulator.helpers import launch, line_of, out

N = 1000
GRID, BLOCK = 4, 256


@pytest.fixture
def xy(rng):
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


def _run(source: str, kernel: str, x, y, result_dtype=np.float32):
    args = [Buffer("x", x), Buffer("y", y), out("z", N, result_dtype), Scalar("n", N)]
    result = launch(source, kernel, GRID, BLOCK, args)
    assert result.findings == []
    return result.outputs["z"]


SCALAR = r"""
__device__ __noinline__ float add(float a, float b) { return a + b; }
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = add(x[i], y[i]);
}
"""


def test_scalar_function(xy):
    x, y = xy
    np.testing.assert_array_equal(_run(SCALAR, "k", x, y), x + y)


POINTER = r"""
__device__ __noinline__ void put(float* p, int i, float v, char twice) { p[i] = twice ? 2.0f * v : v; }
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) put(z, i, x[i] - y[i], i % 3 == 0);
}
"""


def test_void_function_writes_through_a_pointer(xy):
    x, y = xy
    expected = np.where(np.arange(N) % 3 == 0, 2 * (x - y), x - y).astype(np.float32)
    np.testing.assert_array_equal(_run(POINTER, "k", x, y), expected)


LOCAL = r"""
__device__ __noinline__ float pick(const float* x, int i, int n) {
    float t[16];
    for (int k = 0; k < 16; ++k) t[k] = x[(i + k) % n] * k;
    return t[(i * 7) % 16] + t[i % 16];
}
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = pick(x, i, n) + pick(y, i, n);
}
"""


def _pick(x, i):
    t = np.array([x[(i + k) % N] * k for k in range(16)], np.float32)
    return t[(i * 7) % 16] + t[i % 16]


def test_local_array_in_the_callee_and_two_call_sites(xy):
    x, y = xy
    expected = np.array([_pick(x, i) + _pick(y, i) for i in range(N)], np.float32)
    np.testing.assert_allclose(_run(LOCAL, "k", x, y), expected, rtol=1e-6)


NESTED = r"""
__device__ __noinline__ float square(float v) { return v * v; }
__device__ __noinline__ float norm2(float a, float b) { return square(a) + square(b); }
__device__ __noinline__ int clamp(int v, int hi) {
    if (v > hi) return hi;  // an early return inside the callee
    return v;
}
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = norm2(x[i], y[i]) + (float)clamp(i, 500);
}
"""


def test_nested_calls_and_an_early_return(xy):
    x, y = xy
    expected = (x * x + y * y) + np.minimum(np.arange(N), 500).astype(np.float32)
    np.testing.assert_array_equal(_run(NESTED, "k", x, y), expected)


DIVERGENT = r"""
__device__ __noinline__ float series(float v, int terms) {
    float sum = 0.0f, p = 1.0f;
    for (int k = 0; k < terms; ++k) { sum += p; p *= v; }
    return sum;
}
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (x[i] > 0.0f) z[i] = series(y[i], i % 7);
    else z[i] = -x[i];
}
"""


def _series(v, terms):
    total, p = np.float32(0), np.float32(1)
    for _ in range(terms):
        total, p = total + p, p * v
    return total


def test_a_call_only_some_lanes_make(xy):
    x, y = xy
    expected = np.array([_series(y[i], i % 7) if x[i] > 0 else -x[i] for i in range(N)], np.float32)
    np.testing.assert_array_equal(_run(DIVERGENT, "k", x, y), expected)


OOB = r"""
__device__ __noinline__ void store(float* p, int i, float v) {
    p[i + 1] = v;  // writes one past
}
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) store(z, i, x[i] + y[i]);
}
"""


def test_out_of_bounds_inside_the_callee_names_its_line_and_the_array(xy):
    x, y = xy
    args = [Buffer("x", x), Buffer("y", y), out("z", N), Scalar("n", N)]
    result = launch(OOB, "k", GRID, BLOCK, args)
    (finding,) = result.findings
    assert (finding.kind, finding.array, finding.index) == ("out_of_bounds_write", "z", N)
    assert finding.line == line_of(OOB, "writes one past")
    np.testing.assert_array_equal(result.outputs["z"][1:], (x + y)[:-1])


RECURSIVE = r"""
__device__ __noinline__ int fib(int v) { return v < 2 ? v : fib(v - 1) + fib(v - 2); }  // fib
__device__ __noinline__ int odd(int v);
__device__ __noinline__ int even(int v) { return v == 0 ? 1 : odd(v - 1) * 3 + 1; }
__device__ __noinline__ int odd(int v) { return v == 0 ? 0 : even(v - 1) * 5 + 2; }  // odd
extern "C" __global__ void direct(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = fib(i % 10);
}
extern "C" __global__ void mutual(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = even(i % 10);
}
"""


@pytest.mark.parametrize(("kernel", "marker"), [("direct", "// fib"), ("mutual", "// odd")])
def test_recursion_is_unsupported_with_its_line(xy, kernel, marker):
    with pytest.raises(
        Unsupported,
        match=rf"recursive device functions are not emulated "
        rf"\(kernel.cu:{line_of(RECURSIVE, marker)}\)",
    ):
        _run(RECURSIVE, kernel, *xy)


POINTER_CALL = r"""
__device__ float twice(float v) { return 2 * v; }
__device__ float thrice(float v) { return 3 * v; }
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float (*f)(float) = i % 2 ? twice : thrice;
    if (i < n) z[i] = f(x[i]);
}
"""


def test_a_call_through_a_function_pointer_is_unsupported(xy):
    with pytest.raises(Unsupported, match="calls through a function pointer are not emulated"):
        _run(POINTER_CALL, "k", *xy)


AGGREGATES = r"""
struct Pair { float a; int b; double c; };
struct Two { float s; float t; };
__device__ __noinline__ Two mix(Pair p, float w) { return Two{p.a * w + (float)p.b, (float)p.c - w}; }
__device__ __noinline__ void bump(float* acc, int k) { for (int j = 0; j < k; ++j) acc[j % 4] += j; }
__device__ __noinline__ float2 swap(float2 v) { return make_float2(v.y, -v.x); }  // ld/st.param.v2
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc[4] = {0, 0, 0, 0};
    bump(acc, i % 9);  // a pointer to the caller's local array
    Two r = mix(Pair{x[i], i, 0.5 * y[i]}, 3.0f);
    float2 v = swap(make_float2(x[i], 4.0f * y[i]));
    z[i] = r.s + r.t + acc[0] + acc[3] + (v.x - 2.0f * v.y);
}
"""


def test_structs_by_value_and_a_pointer_to_the_callers_local_array(xy):
    x, y = xy
    i = np.arange(N)
    acc = np.zeros((N, 4), np.float32)
    for t in range(N):
        for j in range(t % 9):
            acc[t, j % 4] += j
    two = (x * np.float32(3) + i.astype(np.float32)) + ((0.5 * y.astype(np.float64)).astype(np.float32) - 3)
    swapped = 4 * y + 2 * x
    np.testing.assert_allclose(
        _run(AGGREGATES, "k", x, y), two + acc[:, 0] + acc[:, 3] + swapped, rtol=1e-5, atol=1e-5
    )


BARRIER = r"""
__device__ __noinline__ float rotate(float* s, float v) {
    s[threadIdx.x] = v;
    __syncthreads();
    float o = s[(threadIdx.x + 1) % blockDim.x];
    if (threadIdx.x == 0 && blockIdx.x == 0) printf("first %d\n", (int)blockDim.x);
    return o;
}
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = rotate(s, i < n ? x[i] : 0.0f);
    if (i < n) z[i] = v + y[i];
}
"""


def test_a_barrier_and_printf_inside_the_callee(xy):
    x, y = xy
    args = [Buffer("x", x), Buffer("y", y), out("z", N), Scalar("n", N)]
    result = launch(BARRIER, "k", GRID, BLOCK, args)
    padded = np.concatenate([x, np.zeros(GRID * BLOCK - N, np.float32)]).reshape(GRID, BLOCK)
    rotated = np.roll(padded, -1, axis=1).reshape(-1)[:N]
    np.testing.assert_array_equal(result.outputs["z"], rotated + y)
    assert result.findings == [] and result.stdout == "first 256\n"


BIG_FRAME = r"""
__device__ __noinline__ float spill(float v, int i) {
    float t[40000];  // 160 KiB: four frames would pass CUDA's 512 KiB limit
    volatile float* p = t;
    p[(i * 977) % 40000] = v;
    return p[(i * 977) % 40000] * 2.0f;
}
extern "C" __global__ void k(const float* x, const float* y, float* z, int n) {
    int i = threadIdx.x;
    z[i] = spill(x[i], i) + spill(y[i], i + 1) + spill(x[i], i + 2) + spill(y[i], i + 3);
}
"""


def test_call_sites_of_one_function_share_its_local_frame(xy):
    x, y = (v[:32] for v in xy)
    args = [Buffer("x", x), Buffer("y", y), out("z", 32), Scalar("n", 32)]
    result = launch(BIG_FRAME, "k", 1, 32, args)
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["z"], ((2 * x + 2 * y) + 2 * x) + 2 * y)
