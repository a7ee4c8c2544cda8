"""Grid-wide sync (cooperative groups' ``grid.sync()``) in a cooperative launch: the corpus's
grid-synced reduction against numpy on ragged sizes, and its two planted bugs caught; grid
syncs in a loop; a block, or a block's thread (0,0,0), that leaves before the grid sync;
blocks at different grid syncs (they pass, as on an H200), and one block's threads at a
grid sync and a ``__syncthreads()``; a grid sync in a launch that is not cooperative; a cooperative grid
larger than an H200 holds; ``this_grid()``'s ranks and sizes; the GPU backend's refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autograder.backends.gpu import refuse_cooperative
from autograder.contract import Buffer, Launch, LaunchFailure, Program, Scalar, Unsupported

from .helpers import kinds, launch, line_of, out

REDUCTION = (Path(__file__).parent / "corpus" / "grid_reduction.cu").read_text()
SKIPPED_SYNC = (("PLANTED_BUG", "1"),)
DIVERGENT_SYNC = (("PLANTED_BUG", "2"),)
HEADER = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"


def ragged(rng, low: int, high: int, multiple: int) -> int:
    """A size in [low, high] that is not a multiple of ``multiple``."""
    n = int(rng.integers(low, high))
    return n + 1 if n % multiple == 0 else n


# ----- the corpus: a grid-synced reduction -------------------------------------------------
def run_reduction(rng, defines=()):
    blocks = int(rng.integers(3, 12))
    n = ragged(rng, 2000, 9000, 256)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    args = [Buffer("x", x), out("partial", blocks), out("sum", 1), Scalar("n", n)]
    result = launch(
        REDUCTION,
        "grid_reduction",
        blocks,
        256,
        args,
        defines=defines,
        filename="grid_reduction.cu",
        cooperative=True,
    )
    return result, x.astype(np.float64).sum()


def test_grid_reduction_matches_numpy(rng):
    result, expected = run_reduction(rng)
    np.testing.assert_allclose(
        result.outputs["sum"], [expected], rtol=1e-5, atol=1e-3
    )  # <= 9000 float32 terms
    assert result.findings == []


def test_grid_reduction_without_its_grid_sync_adds_totals_not_yet_written(rng):
    """With no grid sync the blocks run one at a time, block 0 first (``machine.py``): it adds
    up the other blocks' totals before they are written, and reads the poison (NaN)."""
    result, expected = run_reduction(rng, SKIPPED_SYNC)
    assert not np.isclose(result.outputs["sum"][0], expected, rtol=1e-5, atol=1e-3)
    assert result.findings == []  # a wrong answer: the emulator does not see races in global memory


def test_grid_sync_that_block_zero_skips_is_barrier_divergence_on_its_line(rng):
    result, _ = run_reduction(rng, DIVERGENT_SYNC)
    assert kinds(result) == ["barrier_divergence"]
    finding = result.findings[0]
    assert finding.line == line_of(REDUCTION, "if (blockIdx.x != 0) grid.sync();")
    assert "block (0,0,0) never reaches" in finding.message
    assert finding.block != (0, 0, 0)


# ----- grid syncs in a loop ----------------------------------------------------------------
ROTATE = (
    HEADER
    + """
// Each round, every block's row moves to the block before it, through global memory.
__global__ void rotate(float* ring, int rounds) {
    cg::grid_group grid = cg::this_grid();
    int row = blockIdx.x * blockDim.x, next = (blockIdx.x + 1) % gridDim.x * blockDim.x;
#ifdef PLANTED_BUG
    rounds -= blockIdx.x == 0;  // block 0 leaves a round early
#endif
    for (int r = 0; r < rounds; ++r) {
        float v = ring[next + threadIdx.x];
        grid.sync();  // every row read
        ring[row + threadIdx.x] = v;
        grid.sync();  // every row written
    }
}
"""
)
ROTATE_BUDGET = 400_000  # lane instructions: a spinning thread would use them up


def run_rotate(rng, defines=()):
    blocks, threads, rounds = int(rng.integers(3, 7)), 64, int(rng.integers(3, 8))
    ring = rng.uniform(-1, 1, blocks * threads).astype(np.float32)
    args = [Buffer("ring", ring.copy(), True), Scalar("rounds", rounds)]
    result = launch(
        ROTATE, "rotate", blocks, threads, args, defines=defines, budget=ROTATE_BUDGET, cooperative=True
    )
    return result, np.roll(ring.reshape(blocks, threads), -rounds, axis=0).reshape(-1), blocks * rounds


def test_grid_syncs_in_a_loop_release_every_round_without_spinning(rng):
    result, expected, block_rounds = run_rotate(rng)
    np.testing.assert_array_equal(result.outputs["ring"], expected)  # moved, not computed: exact
    assert result.findings == []
    # two grid syncs a round, each two barrier.sync of every block, and no more
    assert result.counters.totals["barriers"] == 4 * block_rounds


def test_a_block_leaving_the_loop_early_is_barrier_divergence(rng):
    result, _, _ = run_rotate(rng, (("PLANTED_BUG", "1"),))
    assert kinds(result) == ["barrier_divergence"]
    assert result.findings[0].line == line_of(ROTATE, "grid.sync();  // every row read")


# ----- leaving before a grid sync ----------------------------------------------------------
LEAVE = (
    HEADER
    + """
__global__ void leave(float* y, int block, int threads) {
    cg::grid_group grid = cg::this_grid();
    if (blockIdx.x == block && threadIdx.x < threads) return;  // leaves
    y[grid.thread_rank()] = 1.0f;
    grid.sync();  // waits
    y[grid.thread_rank()] += 1.0f;
}
"""
)


@pytest.mark.parametrize("threads", [1, 128], ids=["thread_0_of_a_block", "a_whole_block"])
def test_leaving_before_the_grid_sync_is_barrier_divergence(rng, threads):
    """A block whose thread (0,0,0) leaves never adds its arrival: the others would hang."""
    blocks, leaver = 4, int(rng.integers(0, 4))
    result = launch(
        LEAVE,
        "leave",
        blocks,
        128,
        [out("y", blocks * 128), Scalar("block", leaver), Scalar("threads", threads)],
        cooperative=True,
    )
    assert kinds(result) == ["barrier_divergence"]
    finding = result.findings[0]
    assert finding.line == line_of(LEAVE, "grid.sync();  // waits")
    assert f"line {line_of(LEAVE, '// leaves')}" in finding.message


def test_the_same_launch_with_nobody_leaving_is_clean():
    result = launch(
        LEAVE, "leave", 4, 128, [out("y", 512), Scalar("block", 9), Scalar("threads", 128)], cooperative=True
    )
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["y"], np.full(512, 2.0, np.float32))


SITES = (
    HEADER
    + """
// Odd and even blocks sync the grid at different calls, twice: an H200 lets them pass.
__global__ void sites(const float* x, float* y, float* z) {
    cg::grid_group grid = cg::this_grid();
    int b = blockIdx.x, next = (blockIdx.x + 1) % gridDim.x;
    if (b % 2) {
        y[b] = x[b] + 1.0f;
        grid.sync();  // odd blocks
        z[b] = y[next] * 2.0f;
        grid.sync();  // odd blocks again
    } else {
        y[b] = x[b] - 1.0f;
        grid.sync();  // even blocks
        z[b] = y[next] * 3.0f;
        grid.sync();  // even blocks again
    }
    y[b] = z[next];
}
"""
)


def test_blocks_at_different_grid_syncs_pass_each_other(rng):
    """Measured on an H200: the launch's grid syncs share one barrier word."""
    blocks = 2 * int(rng.integers(2, 5))
    x = rng.uniform(-1, 1, blocks).astype(np.float32)
    result = launch(
        SITES, "sites", blocks, 32, [Buffer("x", x), out("y", blocks), out("z", blocks)], cooperative=True
    )
    odd = np.arange(blocks) % 2 == 1
    y = np.where(odd, x + 1, x - 1)
    z = np.roll(y, -1) * np.where(odd, 2, 3)
    np.testing.assert_allclose(result.outputs["y"], np.roll(z, -1), rtol=1e-6)
    assert result.findings == []


MIXED = (
    HEADER
    + """
__global__ void mixed(float* y) {
    cg::grid_group grid = cg::this_grid();
    y[grid.thread_rank()] = 1.0f;
    if (threadIdx.x < 32) grid.sync();  // the first warp
    else __syncthreads();  // the others
    y[grid.thread_rank()] += 1.0f;
}
"""
)


def test_a_grid_sync_and_a_syncthreads_in_one_block_are_a_deadlock():
    result = launch(MIXED, "mixed", 3, 64, [out("y", 192)], cooperative=True)
    assert kinds(result) == ["deadlock"]
    assert result.findings[0].line == line_of(MIXED, "// the first warp")
    assert f"line {line_of(MIXED, '// the others')}" in result.findings[0].message


# ----- launches ----------------------------------------------------------------------------
RANKS = (
    HEADER
    + """
__global__ void ranks(int* block, int* thread, unsigned long long* size, int* valid, int sync) {
    cg::grid_group grid = cg::this_grid();
    unsigned long long r = grid.thread_rank();
    block[r] = blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z;
    thread[r] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
    size[r] = grid.size();
    valid[r] = grid.is_valid();
    if (sync) grid.sync();  // a grid sync
}
"""
)
GRID, BLOCK = (3, 2, 1), (4, 2, 2)


def run_ranks(cooperative: bool, sync: int = 0):
    n = int(np.prod(GRID) * np.prod(BLOCK))
    args = [out("block", n, np.int32), out("thread", n, np.int32), out("size", n, np.uint64)]
    args += [out("valid", n, np.int32), Scalar("sync", sync)]
    return launch(RANKS, "ranks", GRID, BLOCK, args, cooperative=cooperative)


def expected_ranks():
    """Per rank: the block's and the thread's code (x + 10 y + 100 z), x fastest."""
    z, y, x = np.indices(BLOCK[::-1]).reshape(3, -1)
    bz, by, bx = np.indices(GRID[::-1]).reshape(3, -1)
    return np.repeat(bx + 10 * by + 100 * bz, x.size), np.tile(x + 10 * y + 100 * z, bx.size)


@pytest.mark.parametrize("cooperative", [True, False], ids=["cooperative", "ordinary"])
def test_this_grid_ranks_and_size(cooperative):
    result = run_ranks(cooperative)
    blocks, threads = expected_ranks()
    np.testing.assert_array_equal(result.outputs["block"], blocks)
    np.testing.assert_array_equal(result.outputs["thread"], threads)
    assert (result.outputs["size"] == blocks.size).all()
    assert (result.outputs["valid"] == int(cooperative)).all()  # no workspace without a cooperative launch
    assert result.findings == []


def test_grid_sync_in_a_launch_that_is_not_cooperative_traps():
    with pytest.raises(LaunchFailure) as failure:
        run_ranks(cooperative=False, sync=1)
    message = str(failure.value)
    assert message.startswith(f"kernel.cu:{line_of(RANKS, '// a grid sync')}: ")
    assert "needs a cooperative launch (cudaLaunchCooperativeKernel)" in message
    assert run_ranks(cooperative=True, sync=1).findings == []


LAST = (
    "__global__ void last(int* y) { if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) y[0] = gridDim.x; }"
)


@pytest.mark.parametrize(
    ("threads", "shared", "most"),
    [(1024, 0, 132 * 2), (256, 0, 132 * 8), (32, 0, 132 * 32), (64, 100_000, 132 * 2)],
    ids=["threads", "threads_256", "block_slots", "shared_memory"],
)
def test_a_cooperative_grid_larger_than_the_gpu_holds_is_refused(threads, shared, most):
    with pytest.raises(LaunchFailure, match="too many blocks in cooperative launch") as failure:
        launch(LAST, "last", most + 1, threads, [out("y", 1, np.int32)], shared, cooperative=True)
    assert f"at most {most:,} such blocks" in str(failure.value)


@pytest.mark.parametrize("cooperative", [True, False], ids=["cooperative", "ordinary"])
def test_the_largest_cooperative_grid_runs(cooperative):
    blocks = 132 * 2 + (not cooperative)  # one block more: only a cooperative launch has the limit
    result = launch(LAST, "last", blocks, 64, [out("y", 1, np.int32)], 100_000, cooperative=cooperative)
    assert result.outputs["y"][0] == blocks


def test_the_gpu_backend_refuses_a_cooperative_launch():
    program = Program(LAST, "kernel.cu", "last")
    refuse_cooperative(Launch(program, (1, 1, 1), (32, 1, 1), ()))
    with pytest.raises(Unsupported, match="cannot make a cooperative launch"):
        refuse_cooperative(Launch(program, (1, 1, 1), (32, 1, 1), (), cooperative=True))
