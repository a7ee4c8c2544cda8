"""A run of independent ``wmma.mma``s run as one (``ops.fma_runs``, ``wmma.build_mma_run``: each
fragment's registers gathered at once, every product in one matmul) against each instruction run
on its own, as the scheduler runs them without runs.

A tensor-core GEMM whose warps each own a 2 x 2 tile of accumulators (four mmas a step, a run)
runs at several shapes (warps past the last tile return first, so at some the mmas run for
some warps alone, not as a run), f32 and f16 accumulators, accumulators in declared order and
reversed: outputs, findings and counters must be identical, and the runs must have run."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar
from autograder.emulator import machine, ops, wmma
from autograder.emulator.machine import decoded_kernel

from .helpers import launch, out, reported

GEMM = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

// each warp a 32 x 32 tile of C = A B (2 x 2 fragments), A row-major (M x K), B row-major (K x N)
extern "C" __global__ void tile_gemm(const __half* A, const __half* B, ACC* C, int M, int N, int K) {
    int tile_m = blockIdx.y, tile_n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (tile_n * 32 >= N) return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[2];
    wmma::fragment<wmma::accumulator, 16, 16, 16, ACC> c[2][2];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(c[i][j], (ACC)(0.25f * (i + 2 * j)));
    for (int k = 0; k < K; k += 16) {
        for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], A + (tile_m * 32 + 16 * i) * K + k, K);
        for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], B + k * N + tile_n * 32 + 16 * j, N);
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j)
                wmma::mma_sync(c[ORDER(i)][ORDER(j)], a[i], b[j], c[ORDER(i)][ORDER(j)]);
    }
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(C + (tile_m * 32 + 16 * i) * N + tile_n * 32 + 16 * j, c[i][j], N,
                                    wmma::mem_row_major);
}
"""

SHAPES = [(32, 64, 48, 64), (64, 96, 32, 64), (32, 32, 64, 128), (32, 64, 48, 64)]  # M N K block
ORDERS = {"declared": "(x)", "reversed": "(1 - (x))"}


def run(acc: str, order: str, m: int, n: int, k: int, block: int) -> tuple:
    """One launch: its outputs, findings and counters."""
    rng = np.random.default_rng(m * n + k)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    grid = (-(-n // 32 // (block // 32)), m // 32)
    c = out("C", m * n, np.float16 if acc == "half" else np.float32)
    args = [Buffer("A", a.ravel()), Buffer("B", b.ravel()), c]
    args += [Scalar(x, v) for x, v in zip("MNK", (m, n, k), strict=True)]
    defines = (("ACC", acc), ("ORDER(x)", ORDERS[order]))
    return reported(launch(GEMM, "tile_gemm", grid, block, args, defines=defines))


def _runs(acc: str, order: str) -> list[tuple]:
    decoded_kernel.cache_clear()  # no chunk or executor kept from the other way's launches
    results = [run(acc, order, *shape) for shape in SHAPES]
    decoded_kernel.cache_clear()
    return results


def _without_mma_runs(program, registers) -> list[int]:
    """``ops.fma_runs`` with no run of wmma.mmas: each runs on its own."""
    runs = ops.fma_runs(program, registers)
    return [0 if ins.op == "wmma" else span for ins, span in zip(program, runs, strict=True)]


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("acc", ["float", "half"])
def test_a_run_of_mmas_reports_what_each_on_its_own_reports(acc, order, monkeypatch):
    built = []
    build = wmma.build_mma_run

    def recorded(run, ch):
        made = build(run, ch)
        built.append(made is not None)
        return made

    monkeypatch.setattr(wmma, "build_mma_run", recorded)
    as_runs = _runs(acc, order)
    monkeypatch.setattr(machine, "fma_runs", _without_mma_runs)
    alone = _runs(acc, order)
    for shape, mine, theirs in zip(SHAPES, as_runs, alone, strict=True):
        assert mine == theirs, f"M, N, K, block: {shape}"
    assert built and all(built), "no run of mmas run as one"
