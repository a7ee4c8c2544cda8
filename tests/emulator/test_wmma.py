"""wmma (m16n16k16, f16 inputs, f32 accumulators): loads, mma, stores, elementwise fragment ops."""

from __future__ import annotations

import numpy as np

from autograder.contract import Buffer, Scalar

from .helpers import kinds, launch, out

WMMA = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

// one warp per 16 x 16 tile of C = alpha * A B, A row-major (M x K), B column-major (K x N)
extern "C" __global__ void tc_gemm(const __half* A, const __half* B, float* C, int M, int N, int K,
                                   float alpha) {
    int tile_m = blockIdx.y, tile_n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + tile_m * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + tile_n * 16 * K + k, K);
        wmma::mma_sync(c, a, b, c);
    }
    for (int i = 0; i < c.num_elements; ++i) c.x[i] *= alpha;
    wmma::store_matrix_sync(C + tile_m * 16 * N + tile_n * 16, c, N, wmma::mem_row_major);
}
"""


def test_tensor_core_gemm_matches_numpy(rng):
    m, n, k = 32, 64, 48
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    result = launch(
        WMMA,
        "tc_gemm",
        (n // 16 // 2, m // 16),
        64,
        [
            Buffer("A", a.ravel()),
            Buffer("B", b.T.copy().ravel()),
            out("C", m * n),
            Scalar("M", m),
            Scalar("N", n),
            Scalar("K", k),
            Scalar("alpha", 0.5, "float32"),
        ],
    )
    expected = 0.5 * a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(result.outputs["C"].reshape(m, n), expected, rtol=1e-5, atol=1e-5)
    assert result.findings == []
    totals = result.counters.totals
    assert totals["global_load_values"] == 2 * m * n * k // 16  # each warp loads 16x16 tiles of A and B
    assert totals["flops"] >= 2 * m * n * k


def test_tensor_core_tile_past_the_end_is_found(rng):
    m, n, k = 16, 32, 16
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    result = launch(
        WMMA,
        "tc_gemm",
        (2, 1),
        64,  # four warps, two tiles: the last two read past B
        [
            Buffer("A", a.ravel()),
            Buffer("B", b.T.copy().ravel()),
            out("C", m * n),
            Scalar("M", m),
            Scalar("N", n),
            Scalar("K", k),
            Scalar("alpha", 1.0, "float32"),
        ],
    )
    assert "out_of_bounds_read" in kinds(result)
    finding = next(f for f in result.findings if f.kind == "out_of_bounds_read")
    assert finding.array == "B" and finding.bound == k * n
