"""Corpus kernels for tensor cores and bf16 (``corpus/mma_gemm.cu``, ``corpus/bf16_dot.cu``)
against float64 numpy on tile-multiple and ragged sizes, and the bug planted in each file
caught: a wrong answer or the finding it must produce."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar

from .helpers import launch, line_of, out
from .test_mma_sync import bf16_reference, bf16_value

CORPUS = Path(__file__).parent / "corpus"


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()


# ----- mma_gemm.cu: ldmatrix + mma.sync.m16n8k16, f16 -> f32 ----------------------------
def run_gemm(rng, m: int, n: int, k: int, defines=()):
    """(result, C, |C - A B| allowed): each mma.sync adds exact products of halves to its
    accumulator and rounds once to f32, ceil(K / 16) roundings of at most 2^-24 of
    (|A| |B|) each."""
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    result = launch(
        corpus("mma_gemm.cu"),
        "mma_gemm",
        ((n + 15) // 16, (m + 31) // 32),
        128,
        [
            Buffer("A", a.ravel()),
            Buffer("B", b.ravel()),
            out("C", m * n),
            Scalar("M", m),
            Scalar("N", n),
            Scalar("K", k),
        ],
        defines=defines,
        filename="mma_gemm.cu",
    )
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    error = np.abs(result.outputs["C"].reshape(m, n) - a64 @ b64)
    allowed = -(-k // 16) * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
    return result, error, allowed


@pytest.mark.parametrize(("m", "n", "k"), [(64, 48, 64), (37, 29, 45)])
def test_mma_gemm_matches_numpy(rng, m, n, k):
    result, error, allowed = run_gemm(rng, m, n, k)
    assert (error <= allowed).all()  # NaN (a poisoned element never written) fails too
    assert result.findings == []
    totals = result.counters.totals
    warps, steps = 4 * ((n + 15) // 16) * ((m + 31) // 32), (k + 15) // 16
    assert totals["flops"] == warps * steps * 2 * 16 * 8 * 16  # padded tiles count, as on a GPU
    assert totals["shared_load_values"] == warps * steps * (32 + 16) * 8  # ldmatrix .x4 + .x2
    assert totals["shared_load_conflicts"] == 0  # 48-byte rows: the 8 rows of a matrix hit 32 banks


def test_mma_gemm_without_its_barrier_races(rng):
    """Both ldmatrix read rows other threads staged with no barrier between."""
    result, _, _ = run_gemm(rng, 64, 48, 64, defines=(("PLANTED_BUG", "1"),))
    source = corpus("mma_gemm.cu")
    races = {(f.line, f.array) for f in result.findings if f.kind == "shared_race"}
    assert races == {(line_of(source, "m8n8.x4"), "As"), (line_of(source, "m8n8.x2.trans"), "Bs")}


def test_mma_gemm_with_a_fragment_register_swapped_is_wrong(rng):
    result, error, allowed = run_gemm(rng, 64, 48, 64, defines=(("PLANTED_BUG_FRAGMENT", "1"),))
    assert not (error <= allowed).all()
    assert result.findings == []


# ----- bf16_dot.cu: bf16 products, float sums -------------------------------------------
BLOCKS, THREADS = 2, 64


def run_dot(rng, n: int, defines=()):
    """(result, exact, allowed): the exact answer is the f64 sum of the bf16-rounded
    products (values in [1/16, 1), so all positive); each thread's f32 sum of its
    ceil(n / 2 / 128) pairs, the 64-way tree and the atomicAdd round at most
    (terms + 6 + 2) times by 2^-24 of the total."""
    x, y = (
        (rng.uniform(1 / 16, 1, n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        for _ in range(2)
    )
    result = launch(
        corpus("bf16_dot.cu"),
        "bf16_dot",
        BLOCKS,
        THREADS,
        [Buffer("x", x), Buffer("y", y), Buffer("result", np.zeros(1, np.float32), True), Scalar("n", n)],
        defines=defines,
        filename="bf16_dot.cu",
    )  # result starts at 0: the kernel adds into it
    exact = bf16_value(bf16_reference(bf16_value(x) * bf16_value(y))).sum()
    terms = 2 * -(-n // (2 * BLOCKS * THREADS)) + 1
    return result, exact, (terms + 8) * 2.0**-24 * exact


@pytest.mark.parametrize("n", [4096, 4099, 2**18 + 5])
def test_bf16_dot_matches_numpy(rng, n):
    result, exact, allowed = run_dot(rng, n)
    assert abs(result.outputs["result"][0] - exact) <= allowed
    assert result.findings == []


def test_bf16_dot_summed_in_bf16_is_far_off(rng):
    result, exact, allowed = run_dot(rng, 2**18 + 5, defines=(("PLANTED_BUG", "1"),))
    assert abs(result.outputs["result"][0] - exact) > 100 * allowed
