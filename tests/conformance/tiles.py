"""A register tile's update, as the lectures' V x V tile is written: 16 independent f32 fmas in
a row, which the emulator computes as one (``ops.fma_runs``), and the same fmas one lane at a
time (a guard that half the lanes pass). Inputs include sums that a double rounding gets
wrong: ``fma(1 + 2^-23, 2^-24 (1 - 2^-23), 1 + 2^-23)`` is ``1 + 2^-23 + 2^-24 - 2^-70``, one
f64 rounding puts it on the f32 tie ``1 + 2^-23 + 2^-24``, and ties to even would round up."""

from __future__ import annotations

import numpy as np

V = 4
SOURCE = r"""
#define V 4
#define TILE(name, guard)                                                                          \
extern "C" __global__ void name(const float* a, const float* b, const float* c, const unsigned* on, \
                                float* d) {                                                         \
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;                                     \
    float x[V], y[V], acc[V * V];                                                                   \
    for (int i = 0; i < V; ++i) { x[i] = a[t * V + i]; y[i] = b[t * V + i]; }                      \
    for (int k = 0; k < V * V; ++k) acc[k] = c[t * V * V + k];                                      \
    if (guard) {                                                                                    \
        _Pragma("unroll") for (int i = 0; i < V; ++i)                                               \
            _Pragma("unroll") for (int j = 0; j < V; ++j) acc[i * V + j] = fmaf(x[i], y[j], acc[i * V + j]); \
    }                                                                                               \
    for (int k = 0; k < V * V; ++k) d[t * V * V + k] = acc[k];                                      \
}
TILE(tile_converged, true)
TILE(tile_diverged, on[t])
"""


def operands(lanes: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """a, b (V a lane), c (V * V a lane) and on: random magnitudes, edge values and ties."""
    a = (rng.standard_normal(lanes * V) * 2.0 ** rng.integers(-20, 20, lanes * V)).astype(np.float32)
    b = (rng.standard_normal(lanes * V) * 2.0 ** rng.integers(-20, 20, lanes * V)).astype(np.float32)
    c = (rng.standard_normal(lanes * V * V) * 2.0 ** rng.integers(-20, 20, lanes * V * V)).astype(np.float32)
    tie = rng.random(lanes) < 0.25  # a quarter of the lanes: every fma of the tile on a tie
    a.reshape(lanes, V)[tie] = np.float32(1 + 2.0**-23)
    b.reshape(lanes, V)[tie] = np.float32(2.0**-24 * (1 - 2.0**-23))
    c.reshape(lanes, V * V)[tie] = np.float32(1 + 2.0**-23)
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, 3.4e38], np.float32)
    for array in (a, b, c):
        pick = rng.random(array.size) < 0.02
        array[pick] = special[rng.integers(0, special.size, int(pick.sum()))]
    on = (rng.random(lanes) < 0.5).astype(np.uint32)
    return {"a": a, "b": b, "c": c, "on": on}
