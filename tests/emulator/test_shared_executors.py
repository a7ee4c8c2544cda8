"""Executors a kernel's small chunks share (``emulator/shared.py``) give each launch what a fresh
process gives it.

A kernel's register-only instructions are built once and read the registers of the chunk they
are bound to when they run; their paths for some lanes alone are built per chunk. Launches of
one kernel at several shapes, one after another (a shape again after others), must each
compute, report and count what the same launch computes as the first of a fresh process.
Planting a stale binding (``Views.bind`` keeping the last chunk's arrays, or its paths for some
lanes) makes this test fail."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

from autograder.contract import Buffer, Scalar
from autograder.emulator.machine import decoded_kernel

from .helpers import launch, out, reported

# Each thread runs its own number of trips: the loop body's fmas, multiply-adds, setps and
# moves run for every lane first, then for the lanes still in the loop alone; lanes past n
# exit at once.
MIXED = r"""
extern "C" __global__ void mixed(const float* x, const int* k, float* y, int* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = x[i];
    int c = i;
    long long w = (long long)k[i] * 7;
    for (int j = 0; j < k[i]; ++j) {
        a = fmaf(a, 0.75f, 0.5f);
        c = c * 3 + j;
        if (a > 1.0f) c ^= 5;
    }
    y[i] = a > 0.25f ? a : -a;
    z[i] = c ^ (int)w;
}
"""

ROOT = Path(__file__).resolve().parents[2]
SHAPES = [(2, 64, 100), (3, 96, 250), (1, 32, 20), (2, 64, 128), (2, 64, 100)]  # grid, block, n


def run(grid: int, block: int, n: int) -> tuple:
    """One launch: its outputs, findings and counters."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(grid * block).astype(np.float32)
    k = rng.integers(1, 6, grid * block).astype(np.int32)
    args = [Buffer("x", x), Buffer("k", k), out("y", grid * block), out("z", grid * block, np.int32)]
    return reported(launch(MIXED, "mixed", grid, block, [*args, Scalar("n", n)]))


FRESH = """
import pickle, sys
from autograder.emulator.machine import decoded_kernel
from tests.emulator.test_shared_executors import SHAPES, run
results = []
for shape in SHAPES:
    decoded_kernel.cache_clear()  # each launch the first of its kernel, as in a fresh process
    results.append(run(*shape))
sys.stdout.buffer.write(pickle.dumps(results))
"""


def test_launches_at_several_shapes_each_compute_as_a_fresh_process_would():
    decoded_kernel.cache_clear()
    shared = [run(*shape) for shape in SHAPES]  # one kernel: its executors built once, shared
    assert shared[0] == shared[-1] and shared[0][0] != shared[3][0]
    fresh = subprocess.run(
        [sys.executable, "-c", FRESH], capture_output=True, check=True, cwd=ROOT, timeout=300
    ).stdout
    for shape, mine, theirs in zip(SHAPES, shared, pickle.loads(fresh), strict=True):
        assert mine == theirs, f"grid {shape[0]}, block {shape[1]}, n {shape[2]}"
