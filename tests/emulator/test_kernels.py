"""Reference-like kernels give the numpy answer, on aligned and ragged shapes, with no findings."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar

from .helpers import launch, out

VECTOR_ADD = r"""
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

WINDOW_SUM = r"""
#ifndef R
#define R 2
#endif
#define BLOCK 128
extern "C" __global__ void window_sum(const float* x, float* y, int n) {
    __shared__ float s[BLOCK + 2 * R];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    int t = threadIdx.x + R;
    s[t] = i < n ? x[i] : 0.0f;
    if (threadIdx.x < R) {
        int left = i - R, right = i + BLOCK;
        s[threadIdx.x] = left >= 0 && left < n ? x[left] : 0.0f;
        s[t + BLOCK] = right < n ? x[right] : 0.0f;
    }
    __syncthreads();
    if (i < n) {
        float acc = 0.0f;
        for (int k = -R; k <= R; ++k) acc += s[t + k];
        y[i] = acc;
    }
}
"""

GEMM = r"""
template <int T>
__global__ void gemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T + 1];
    int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? A[r * K + k0 + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (c < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + c] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (r < M && c < N) C[r * N + c] = acc;
}
template __global__ void gemm_tiled<16>(const float*, const float*, float*, int, int, int);

extern "C" __global__ void gemm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M || c >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[r * K + k] * B[k * N + c];
    C[r * N + c] = acc;
}
"""

REDUCE = r"""
extern "C" __global__ void block_sum(const float* x, float* total, int n) {
    extern __shared__ float s[];
    int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
    float v = 0.0f;
    if (i < n) v = x[i];
    if (i + blockDim.x < n) v += x[i + blockDim.x];
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride >= 32; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x < 32) {
        v = s[threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) atomicAdd(total, v);
    }
}
"""

HISTOGRAM = r"""
extern "C" __global__ void histogram(const int* x, unsigned* bins, int n, int nbins) {
    extern __shared__ unsigned local_bins[];
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) local_bins[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local_bins[x[i] % nbins], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) atomicAdd(&bins[b], local_bins[b]);
}
"""

TRANSPOSE = r"""
#define TILE 32
extern "C" __global__ void transpose(const double* in, double* out, int rows, int cols) {
    __shared__ double tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""


@pytest.mark.parametrize("n", [4096, 1000, 1])
def test_vector_add(rng, n):
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    result = launch(
        VECTOR_ADD,
        "vector_add",
        (n + 255) // 256,
        256,
        [Buffer("a", a), Buffer("b", b), out("c", n), Scalar("n", n)],
    )
    np.testing.assert_array_equal(result.outputs["c"], a + b)
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["a"], a)


@pytest.mark.parametrize("n", [1024, 1000, 77])
@pytest.mark.parametrize("radius", [1, 3])
def test_window_sum(rng, n, radius):
    x = rng.standard_normal(n).astype(np.float32)
    result = launch(
        WINDOW_SUM,
        "window_sum",
        (n + 127) // 128,
        128,
        [Buffer("x", x), out("y", n), Scalar("n", n)],
        defines=(("R", str(radius)),),
    )
    padded = np.concatenate([np.zeros(radius), x.astype(np.float64), np.zeros(radius)])
    expected = np.convolve(padded, np.ones(2 * radius + 1), "valid")
    np.testing.assert_allclose(result.outputs["y"], expected, rtol=1e-5, atol=1e-5)
    assert result.findings == []


@pytest.mark.parametrize(("m", "n", "k"), [(64, 48, 32), (37, 29, 23)])
@pytest.mark.parametrize("kernel", ["gemm_tiled<16>", "gemm_naive"])
def test_gemm(rng, m, n, k, kernel):
    a = rng.standard_normal(m * k).astype(np.float32)
    b = rng.standard_normal(k * n).astype(np.float32)
    result = launch(
        GEMM,
        kernel,
        ((n + 15) // 16, (m + 15) // 16),
        (16, 16),
        [Buffer("A", a), Buffer("B", b), out("C", m * n), Scalar("M", m), Scalar("N", n), Scalar("K", k)],
    )
    expected = a.reshape(m, k).astype(np.float64) @ b.reshape(k, n)
    np.testing.assert_allclose(result.outputs["C"].reshape(m, n), expected, rtol=1e-4, atol=1e-4)
    assert result.findings == []


@pytest.mark.parametrize("n", [1 << 14, 5000])
def test_block_sum_with_shuffles_and_atomics(rng, n):
    x = rng.random(n, np.float32)
    block = 256
    grid = (n + 2 * block - 1) // (2 * block)
    total = Buffer("total", np.zeros(1, np.float32), True)
    result = launch(
        REDUCE, "block_sum", grid, block, [Buffer("x", x), total, Scalar("n", n)], shared_bytes=block * 4
    )
    np.testing.assert_allclose(result.outputs["total"][0], x.astype(np.float64).sum(), rtol=1e-5)
    assert result.findings == []


def test_histogram_shared_atomics(rng):
    n, nbins = 10000, 37
    x = rng.integers(0, 1000, n).astype(np.int32)
    bins = Buffer("bins", np.zeros(nbins, np.uint32), True)
    result = launch(
        HISTOGRAM,
        "histogram",
        8,
        128,
        [Buffer("x", x), bins, Scalar("n", n), Scalar("nbins", nbins)],
        shared_bytes=nbins * 4,
    )
    np.testing.assert_array_equal(result.outputs["bins"], np.bincount(x % nbins, minlength=nbins))
    assert result.findings == []


@pytest.mark.parametrize(("rows", "cols"), [(64, 96), (45, 70)])
def test_transpose_double(rng, rows, cols):
    x = rng.standard_normal(rows * cols)
    result = launch(
        TRANSPOSE,
        "transpose",
        ((cols + 31) // 32, (rows + 31) // 32),
        (32, 8),
        [Buffer("in", x), out("out", rows * cols, np.float64), Scalar("rows", rows), Scalar("cols", cols)],
    )
    np.testing.assert_array_equal(result.outputs["out"], x.reshape(rows, cols).T.ravel())
    assert result.findings == []


COLLATZ = r"""
extern "C" __global__ void collatz(const unsigned* start, int* steps, int* first_big, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = start[i];
    int k = 0;
    first_big[i] = -1;
    while (v != 1) {
        if (v & 1) {
            v = 3 * v + 1;
            if (v > 1000 && first_big[i] < 0) first_big[i] = k;
        } else {
            v >>= 1;
        }
        ++k;
        if (k > 500) return;  // early exit from inside the loop
    }
    steps[i] = k;
}
"""


def _collatz(v: int) -> tuple[int, int]:
    k, big = 0, -1
    while v != 1:
        if v & 1:
            v = 3 * v + 1
            if v > 1000 and big < 0:
                big = k
        else:
            v >>= 1
        k += 1
        if k > 500:
            return -2, big
    return k, big


def test_divergent_loops_with_different_trip_counts_and_exits(rng):
    n = 300
    start = rng.integers(1, 5000, n).astype(np.uint32)
    steps = Buffer("steps", np.full(n, -2, np.int32), True)
    result = launch(
        COLLATZ,
        "collatz",
        3,
        128,
        [Buffer("start", start), steps, out("first_big", n, np.int32), Scalar("n", n)],
    )
    expected = [_collatz(int(v)) for v in start]
    np.testing.assert_array_equal(result.outputs["steps"], [e[0] for e in expected])
    np.testing.assert_array_equal(result.outputs["first_big"], [e[1] for e in expected])
    assert result.findings == []


GRID_3D = r"""
extern "C" __global__ void ids(int* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz)
        out[(z * ny + y) * nx + x] = x + 100 * y + 10000 * z + (threadIdx.x / 32) * 1000000 + gridDim.z;
}
"""


def test_three_dimensional_grid_and_block_ids():
    nx, ny, nz = 37, 9, 5
    args = [out("out", nx * ny * nz, np.int32), Scalar("nx", nx), Scalar("ny", ny), Scalar("nz", nz)]
    result = launch(GRID_3D, "ids", (2, 3, 3), (32, 4, 2), args)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(result.outputs["out"], (x + 100 * y + 10000 * z + 3).ravel())
