"""Counted traffic equals the analytic counts of the lectures, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar

from .helpers import launch, line_of, out
from .test_kernels import GEMM

COUNTED_GEMM = GEMM.replace(
    "template __global__ void gemm_tiled<16>",
    "template __global__ void gemm_tiled<32>(const float*, const float*, float*, "
    "int, int, int);\ntemplate __global__ void gemm_tiled<16>",
)


def _gemm(rng, kernel, m, n, k, tile):
    a = rng.standard_normal(m * k).astype(np.float32)
    b = rng.standard_normal(k * n).astype(np.float32)
    return launch(
        COUNTED_GEMM,
        kernel,
        (n // tile, m // tile),
        (tile, tile),
        [Buffer("A", a), Buffer("B", b), out("C", m * n), Scalar("M", m), Scalar("N", n), Scalar("K", k)],
    )


def test_naive_gemm_loads_two_values_per_multiply_add(rng):
    m, n, k = 64, 32, 48
    counters = _gemm(rng, "gemm_naive", m, n, k, 16).counters.totals
    assert counters["global_load_values"] == 2 * m * n * k
    assert counters["global_load_bytes"] == 8 * m * n * k
    assert counters["global_store_values"] == m * n
    assert counters["flops"] == 2 * m * n * k
    # per warp (16 lanes of row r, 16 of row r + 1) and k: A is 2 rows -> 2 sectors,
    # B is the same 16 floats (64 bytes) for both rows -> 2 sectors
    warps = m * n // 32
    assert counters["global_load_requests"] == 2 * warps * k
    assert counters["global_load_sectors"] == warps * k * (2 + 2)


@pytest.mark.parametrize("tile", [16, 32])
def test_tiled_gemm_loads_divide_by_the_tile(rng, tile):
    m, n, k = 64, 64, 64
    result = _gemm(rng, f"gemm_tiled<{tile}>", m, n, k, tile)
    counters = result.counters.totals
    assert counters["global_load_values"] == 2 * m * n * k // tile
    assert counters["shared_load_values"] == 2 * m * n * k
    assert counters["shared_load_bytes"] == 4 * 2 * m * n * k  # floats
    assert counters["shared_store_bytes"] == counters["global_load_bytes"]  # each loaded tile is staged
    assert counters["barriers"] == 2 * (m // tile) * (n // tile) * (k // tile)
    assert counters["shared_load_conflicts"] == 0
    assert counters["global_load_sectors"] * 32 == counters["global_load_bytes"]  # fully coalesced
    by_line = result.counters.by_line
    assert sum(row["global_load_values"] for row in by_line.values()) == counters["global_load_values"]
    load_a = line_of(GEMM, "As[threadIdx.y][threadIdx.x] =")
    assert by_line[load_a]["global_load_values"] == m * n * k // tile


STRIDED = r"""
extern "C" __global__ void gather(const float* x, float* y, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = x[i * stride];
}
"""


@pytest.mark.parametrize(("stride", "sectors_per_warp"), [(1, 4), (2, 8), (8, 32), (100, 32)])
def test_sectors_measure_coalescing(rng, stride, sectors_per_warp):
    n = 256
    x = rng.random(n * stride, np.float32)
    counters = launch(STRIDED, "gather", 2, 128, [Buffer("x", x), out("y", n), Scalar("stride", stride)])
    totals = counters.counters.totals
    assert totals["global_load_requests"] == n // 32
    assert totals["global_load_sectors"] == n // 32 * sectors_per_warp
    assert totals["global_store_sectors"] == n // 32 * 4


COLUMN = r"""
#ifndef PAD
#define PAD 0
#endif
extern "C" __global__ void column(const float* x, float* y) {
    __shared__ float tile[32][32 + PAD];
    int tx = threadIdx.x, ty = threadIdx.y;
    tile[ty][tx] = x[ty * 32 + tx];
    __syncthreads();
    y[ty * 32 + tx] = tile[tx][ty];  // column read
}
"""


@pytest.mark.parametrize(("pad", "wavefronts"), [(0, 32), (1, 1)])
def test_bank_conflicts(rng, pad, wavefronts):
    x = rng.random(1024, np.float32)
    result = launch(
        COLUMN, "column", 1, (32, 32), [Buffer("x", x), out("y", 1024)], defines=(("PAD", str(pad)),)
    )
    np.testing.assert_array_equal(result.outputs["y"], x.reshape(32, 32).T.ravel())
    row = result.counters.by_line[line_of(COLUMN, "column read")]
    assert row["shared_load_requests"] == 32
    assert row["shared_load_wavefronts"] == 32 * wavefronts
    assert row["shared_load_conflicts"] == 32 * (wavefronts - 1)
    assert result.counters.totals["shared_store_conflicts"] == 0


BROADCAST = r"""
extern "C" __global__ void broadcast(float* y) {
    __shared__ float s[64];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    y[threadIdx.x] = s[threadIdx.x / 8] + s[(threadIdx.x * 2) % 64];  // mixed
}
"""


def test_broadcast_is_free_and_two_way_conflicts_count_once():
    result = launch(BROADCAST, "broadcast", 1, 64, [out("y", 64)])
    row = result.counters.by_line[line_of(BROADCAST, "mixed")]
    # s[t/8]: 4 distinct words per warp, distinct banks -> 1; s[2t % 64]: 2 words per bank -> 2
    assert row["shared_load_wavefronts"] == 2 * (1 + 2)
    assert row["shared_load_conflicts"] == 2


def test_divergent_instructions_count_only_active_lanes(rng):
    n = 100
    from .test_kernels import VECTOR_ADD

    result = launch(
        VECTOR_ADD,
        "vector_add",
        1,
        128,
        [
            Buffer("a", rng.random(n, np.float32)),
            Buffer("b", rng.random(n, np.float32)),
            out("c", n),
            Scalar("n", n),
        ],
    )
    totals = result.counters.totals
    assert totals["global_load_values"] == 2 * n
    assert totals["global_load_requests"] == 2 * 4  # warps 0..3 (the last one partly active)
    assert totals["warp_instructions"] < totals["lane_instructions"]


GENERIC = r"""
extern "C" __global__ void generic(const float* x, float* y, int use_shared) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = 2.0f * x[t];
    __syncthreads();
    const float* volatile p = use_shared ? s : x;
    y[t] = p[(t + 1) % 64];  // generic load
}
"""


def test_generic_addresses_count_in_the_space_they_reach(rng):
    x = rng.random(64, np.float32)
    for use_shared, space in ((1, "shared"), (0, "global")):
        args = [Buffer("x", x), out("y", 64), Scalar("use_shared", use_shared)]
        result = launch(GENERIC, "generic", 1, 64, args)
        np.testing.assert_array_equal(result.outputs["y"], np.roll(x, -1) * (2 if use_shared else 1))
        assert result.findings == []
        row = result.counters.by_line[line_of(GENERIC, "generic load")]
        assert row[f"{space}_load_values"] == 64
