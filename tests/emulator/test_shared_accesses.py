"""Loads and stores a kernel's small chunks share (``shared._ld``, ``shared._st``) against the
per-chunk executors they replace (``access.build_ld``, ``access.build_st``).

One kernel runs at several shapes in one process (its executors built once and bound to each
chunk in turn, a shape again after others), then again with every executor built per chunk:
outputs, findings and counters must be identical. Its loads and stores cover what the shared
paths resolve themselves: vectors into consecutive registers (one copy) and out of them,
addresses in 64-bit and 32-bit registers with and without an offset, and
loads, one a vector's, some lanes make out of bounds (findings, garbage read)."""

from __future__ import annotations

import numpy as np

from autograder.contract import Buffer, Scalar
from autograder.emulator.machine import decoded_kernel

from .helpers import every_executor_per_chunk, launch, out, reported, shared_built

TILES = r"""
extern "C" __global__ void tiles(const float4* x, const float* w, float* y, int n, int reach) {
    __shared__ float4 tile[64];
    __shared__ float row[64];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    float4 v = x[i];
    tile[t] = v;
    row[t] = w[i] * 2.0f;
    __syncthreads();
    float4 u = tile[(t + 1) % blockDim.x];
    float s = row[blockDim.x - 1 - t];
    float z = w[i + reach];
    float4 o = x[i + reach];
    float q = ((const float*)x)[4 * i + 2] + tile[t].z;
    y[i] = u.x + u.y * u.z - u.w + s + z + q + o.x - o.y * o.z + o.w;
    y[i + n] = 1.5f;
}
"""

SHAPES = [(2, 64, 0), (3, 32, 5), (1, 64, 0), (2, 64, 3), (2, 64, 0)]  # grid, block, reach


def run(grid: int, block: int, reach: int) -> tuple:
    """One launch: its outputs, findings and counters."""
    n = grid * block
    rng = np.random.default_rng(n + reach)
    x = rng.standard_normal(4 * n).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    args = [Buffer("x", x), Buffer("w", w), out("y", 2 * n), Scalar("n", n), Scalar("reach", reach)]
    return reported(launch(TILES, "tiles", grid, block, args))


def _runs() -> list[tuple]:
    decoded_kernel.cache_clear()  # no chunk or executor kept from the other way's launches
    results = [run(*shape) for shape in SHAPES]
    decoded_kernel.cache_clear()
    return results


def test_shared_loads_and_stores_report_what_per_chunk_ones_report(monkeypatch):
    used = shared_built(monkeypatch)
    with_shared = _runs()
    every_executor_per_chunk(monkeypatch)
    without = _runs()
    assert with_shared[1][1] and not with_shared[0][1], "the out-of-bounds loads were not reported"
    for shape, mine, theirs in zip(SHAPES, with_shared, without, strict=True):
        assert mine == theirs, f"grid {shape[0]}, block {shape[1]}, reach {shape[2]}"
    for op in ("ld.global.v4", "st.shared.v4", "ld.shared.v4", "ld.global", "st.global"):
        assert any(u.startswith(op) for u in used), f"no shared executor for {op}: {sorted(set(used))}"
