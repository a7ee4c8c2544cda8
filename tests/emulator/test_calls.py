"""Device functions NVRTC leaves as ``.func`` (``__noinline__``) run inlined by the emulator."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.backends.base import Buffer, Scalar, Unsupported
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
    with pytest.raises(Unsupported, match=rf"recursive device functions are not emulated "
                                          rf"\(kernel.cu:{line_of(RECURSIVE, marker)}\)"):
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
