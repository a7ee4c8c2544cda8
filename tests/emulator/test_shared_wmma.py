"""``wmma.mma`` as a kernel's small chunks share it (``shared._wmma``: its fragments read from the
chunk bound when it runs) against the per-chunk executor it replaces (``wmma.build_wmma``).

One tensor-core GEMM runs at several shapes in one process (its executors built once and bound
to each chunk in turn, a shape again after others), then again with every executor built per
chunk: outputs, findings and counters must be identical. Warps past the last tile return
first, so at some shapes the mma runs for some warps alone; f32 and f16 accumulators."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar
from autograder.emulator.machine import decoded_kernel

from .helpers import every_executor_per_chunk, launch, out, reported, shared_built

GEMM = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

// one warp per 16 x 16 tile of C = A B, A row-major (M x K), B column-major (K x N)
extern "C" __global__ void tc_gemm(const __half* A, const __half* B, ACC* C, int M, int N, int K) {
    int tile_m = blockIdx.y, tile_n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (tile_n * 16 >= N) return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, ACC> c;
    wmma::fill_fragment(c, (ACC)0.5f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + tile_m * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + tile_n * 16 * K + k, K);
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + tile_m * 16 * N + tile_n * 16, c, N, wmma::mem_row_major);
}
"""

SHAPES = [
    (32, 64, 48, 64),
    (16, 48, 32, 64),
    (16, 32, 32, 32),
    (16, 16, 16, 128),
    (32, 64, 48, 64),
]  # M N K block


def run(acc: str, m: int, n: int, k: int, block: int) -> tuple:
    """One launch: its outputs, findings and counters."""
    rng = np.random.default_rng(m * n + k)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    warps = block // 32
    grid = (-(-n // 16 // warps), m // 16)
    c = out("C", m * n, np.float16 if acc == "half" else np.float32)
    args = [
        Buffer("A", a.ravel()),
        Buffer("B", b.T.copy().ravel()),
        c,
        *(Scalar(x, v) for x, v in zip("MNK", (m, n, k), strict=True)),
    ]
    return reported(launch(GEMM, "tc_gemm", grid, block, args, defines=(("ACC", acc),)))


def _runs(acc: str) -> list[tuple]:
    decoded_kernel.cache_clear()  # no chunk or executor kept from the other way's launches
    results = [run(acc, *shape) for shape in SHAPES]
    decoded_kernel.cache_clear()
    return results


@pytest.mark.parametrize("acc", ["float", "half"])
def test_shared_mma_reports_what_the_per_chunk_one_reports(acc, monkeypatch):
    used = shared_built(monkeypatch)
    with_shared = _runs(acc)
    every_executor_per_chunk(monkeypatch)
    without = _runs(acc)
    for shape, mine, theirs in zip(SHAPES, with_shared, without, strict=True):
        assert mine == theirs, f"M, N, K, block: {shape}"
    assert any(u.startswith("wmma.mma") for u in used), f"no shared mma: {sorted(set(used))}"
