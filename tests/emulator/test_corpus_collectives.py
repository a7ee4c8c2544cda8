"""Classic kernels of the corpus (``corpus/*.cu``): each checked against a float64 numpy
reference on ragged sizes, and each with its planted bug (``-D PLANTED_BUG``) caught, as a
wrong answer or as the finding a GPU checker would report. Warp matching, cooperative
groups' tiles of more than a warp (the block's reserved shared memory) and the headers
``cooperative_groups/scan.h`` and ``memcpy_async.h`` run here in kernels of their own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar
from autograder.course.policy import include_problem
from autograder.emulator.memory import FIRST_SHARED, RED_ZONE

from .helpers import launch, line_of, out

CORPUS = Path(__file__).parent / "corpus"
BUG = (("PLANTED_BUG", 1),)
KERNELS = (
    "scan",
    "histogram",
    "bitonic_sort",
    "separable_conv",
    "warp_aggregated_atomics",
    "tile64",
    "cg_scan",
)


def source(name: str) -> str:
    return (CORPUS / f"{name}.cu").read_text()


def run(name: str, kernel: str, grid, block, args, defines=()):
    return launch(source(name), kernel, grid, block, args, defines=defines, filename=f"{name}.cu")


def ragged(rng, low: int, high: int, multiple: int) -> int:
    """A size in [low, high) that is not a multiple of ``multiple``."""
    n = int(rng.integers(low, high))
    return n + 1 if n % multiple == 0 else n


def findings_of(result, kind: str):
    return [f for f in result.findings if f.kind == kind]


# ----- block-wide inclusive scan ----------------------------------------------------------
def run_scan(rng, defines=()):
    n = ragged(rng, 1000, 3000, 256)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    result = run(
        "scan", "block_scan", -(-n // 256), 256, [Buffer("x", x), out("y", n), Scalar("n", n)], defines
    )
    blocks = np.split(x.astype(np.float64), range(256, n, 256))
    return result, np.concatenate([np.cumsum(b) for b in blocks])


def test_block_scan_matches_numpy(rng):
    result, expected = run_scan(rng)
    np.testing.assert_allclose(result.outputs["y"], expected, rtol=1e-5, atol=1e-4)  # 256 float32 sums
    assert result.findings == []


def test_block_scan_without_its_barrier_is_a_race_on_the_warp_totals(rng):
    result, _ = run_scan(rng, BUG)
    races = findings_of(result, "shared_race")
    assert races and {f.array for f in races} == {"totals"}


# ----- shared-memory histogram ------------------------------------------------------------
def run_histogram(rng, defines=()):
    n = ragged(rng, 3000, 9000, 64)
    keys = rng.integers(0, 64, n).astype(np.int32)
    before = rng.integers(1, 1000, 64).astype(np.uint32)  # counts already there, never zeros
    result = run(
        "histogram",
        "histogram",
        5,
        192,
        [Buffer("keys", keys), Buffer("hist", before.copy(), True), Scalar("n", n)],
        defines,
    )
    return result, before + np.bincount(keys, minlength=64)


def test_histogram_matches_numpy(rng):
    result, expected = run_histogram(rng)
    np.testing.assert_array_equal(result.outputs["hist"], expected)
    assert result.findings == []


def test_histogram_never_zeroed_counts_wrong(rng):
    result, expected = run_histogram(rng, BUG)
    assert (result.outputs["hist"] != expected).any()


# ----- bitonic sort ---------------------------------------------------------------------
def run_sort(rng, defines=()):
    n = ragged(rng, 600, 1500, 256)
    keys = rng.standard_normal(n).astype(np.float32)
    result = run(
        "bitonic_sort",
        "bitonic_sort",
        -(-n // 256),
        256,
        [Buffer("keys", keys), out("sorted", n), Scalar("n", n)],
        defines,
    )
    return result, np.concatenate([np.sort(b) for b in np.split(keys, range(256, n, 256))])


def test_bitonic_sort_sorts_each_block(rng):
    result, expected = run_sort(rng)
    np.testing.assert_array_equal(result.outputs["sorted"], expected)  # a permutation: exact
    assert result.findings == []


def test_bitonic_sort_without_its_barrier_races(rng):
    result, _ = run_sort(rng, BUG)
    races = findings_of(result, "shared_race")
    assert races and races[0].array == "s"


# ----- separable convolution ---------------------------------------------------------------
TAPS = np.array([-0.1, 0.2, 0.5, 0.3, 0.1])


def run_convolution(rng, defines=()):
    w, h = ragged(rng, 40, 70, 16), ragged(rng, 20, 50, 16)
    image = rng.uniform(-1, 1, (h, w)).astype(np.float32)
    result = run(
        "separable_conv",
        "separable_conv",
        (-(-w // 16), -(-h // 16)),
        (16, 16),
        [Buffer("image", image.ravel()), out("out", w * h), Scalar("w", w), Scalar("h", h)],
        defines,
    )
    padded = np.pad(image.astype(np.float64), 2)
    rows = sum(TAPS[j] * padded[:, j : j + w] for j in range(5))
    expected = sum(TAPS[j] * rows[j : j + h, :] for j in range(5))
    return result, expected


def test_separable_convolution_matches_numpy(rng):
    result, expected = run_convolution(rng)
    np.testing.assert_allclose(result.outputs["out"].reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)
    assert result.findings == []


def test_separable_convolution_unguarded_halo_reads_before_the_image(rng):
    result, expected = run_convolution(rng, BUG)
    reads = findings_of(result, "out_of_bounds_read")
    assert reads and reads[0].array == "image" and reads[0].index < 0
    assert "image[" in reads[0].message
    assert not np.allclose(result.outputs["out"].reshape(expected.shape), expected)


# ----- warp-aggregated atomics with labeled_partition ------------------------------------
def run_buckets(rng, defines=()):
    n = ragged(rng, 500, 1500, 32)
    buckets = int(rng.integers(3, 9))
    keys = rng.integers(0, buckets, n).astype(np.int32)
    result = run(
        "warp_aggregated_atomics",
        "bucket_slots",
        -(-n // 128),
        128,
        [
            Buffer("keys", keys),
            Buffer("counts", np.zeros(buckets, np.int32), True),
            out("slots", n, np.int32),
            Scalar("n", n),
        ],
        defines,
    )
    return result, keys, np.bincount(keys, minlength=buckets)


def test_warp_aggregated_atomics_count_and_hand_out_every_slot_once(rng):
    result, keys, expected = run_buckets(rng)
    np.testing.assert_array_equal(result.outputs["counts"], expected)
    slots = result.outputs["slots"]
    for bucket, count in enumerate(expected):
        np.testing.assert_array_equal(np.sort(slots[keys == bucket]), np.arange(count))
    assert result.findings == []
    groups = sum(np.unique(keys[k : k + 32]).size for k in range(0, keys.size, 32))
    assert (
        result.counters.totals["global_store_values"] == keys.size + groups
    )  # the slots, one atomic a group


def test_warp_aggregated_atomics_where_every_lane_adds_count_too_many(rng):
    result, _, expected = run_buckets(rng, BUG)
    assert (result.outputs["counts"] > expected).any()


# ----- a tile of 64 threads with block_tile_memory ---------------------------------------
def run_tile64(rng, defines=()):
    rows = ragged(rng, 9, 40, 4)  # 4 rows a block: the last block has tiles past the end
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    result = run(
        "tile64",
        "tile64",
        -(-rows // 4),
        256,
        [Buffer("x", x.ravel()), out("y", x.size), Scalar("rows", rows)],
        defines,
    )
    wide = x.astype(np.float64)
    expected = (wide - wide.max(axis=1, keepdims=True) + wide[:, -1:])[:, ::-1]
    return result, expected


def test_tile_of_64_threads_reduces_and_exchanges_across_its_warps(rng):
    result, expected = run_tile64(rng)
    np.testing.assert_allclose(result.outputs["y"].reshape(expected.shape), expected, rtol=1e-6, atol=1e-6)
    assert result.findings == []


def test_tile_of_64_threads_without_its_sync_races_across_warps(rng):
    result, _ = run_tile64(rng, BUG)
    races = findings_of(result, "shared_race")
    assert races and races[0].array == "shifted"


RESERVED = r"""
#define R(what) \
    ([] { unsigned v; asm volatile("mov.u32 %0, %%reserved_smem_offset_" #what ";" : "=r"(v)); return v; })()
extern "C" __global__ void where(unsigned* o, int past) {
    __shared__ float s[100];
    extern __shared__ float d[];
    s[threadIdx.x] = 1.0f;
    d[threadIdx.x] = 2.0f;
    o[0] = R(begin); o[1] = R(end); o[2] = R(cap); o[3] = R(0); o[4] = R(1);
    o[5] = (unsigned)__cvta_generic_to_shared(s);
    o[6] = (unsigned)__cvta_generic_to_shared(d);
    asm volatile("st.shared.u32 [%0], %1;" :: "r"(R(begin) + 4 * (threadIdx.x + past)), "r"(0));  // reserved
}
"""


def test_the_reserved_region_lies_apart_from_the_kernels_shared_variables():
    result = launch(RESERVED, "where", 1, 64, [out("o", 7, np.uint32), Scalar("past", 0)], shared_bytes=3000)
    begin, end, cap, first, second, s, d = (int(v) for v in result.outputs["o"])
    assert (end - begin, cap) == (288, 1024)  # as an H200 reads them
    assert begin <= min(first, second) and max(first, second) < end
    assert begin + cap <= s and s + 400 <= d  # the kernel's variables follow it, apart
    assert result.findings == []


def test_an_access_past_the_reserved_region_is_out_of_bounds():
    words = (FIRST_SHARED - RED_ZONE) // 4  # the region, short of the red zone before the kernel's own
    past = Scalar("past", words - 32)  # lanes 32..63 write past its words, into the red zone
    result = launch(RESERVED, "where", 1, 64, [out("o", 7, np.uint32), past], shared_bytes=3000)
    writes = findings_of(result, "out_of_bounds_write")
    assert writes and writes[0].array == "the block's reserved shared memory" and writes[0].index == words
    assert writes[0].line == line_of(RESERVED, "// reserved")


# ----- cg::inclusive_scan (scan.h) and cg::memcpy_async (memcpy_async.h) -----------------
def run_compaction(rng, defines=()):
    n = ragged(rng, 500, 1200, 128)
    x = rng.standard_normal(n).astype(np.float32)
    threshold = float(rng.uniform(-0.5, 0.5))
    blocks = -(-n // 128)
    result = run(
        "cg_scan",
        "compact",
        blocks,
        128,
        [
            Buffer("x", x),
            out("kept", n),
            out("counts", blocks, np.int32),
            Scalar("n", n),
            Scalar("threshold", threshold, "float32"),
        ],
        defines,
    )
    chunks = np.split(x, range(128, n, 128))
    return result, [c[c > np.float32(threshold)] for c in chunks]


def test_compaction_with_cg_scan_and_memcpy_async_matches_numpy(rng):
    result, expected = run_compaction(rng)
    np.testing.assert_array_equal(result.outputs["counts"], [e.size for e in expected])
    for block, values in enumerate(expected):
        np.testing.assert_array_equal(result.outputs["kept"][128 * block : 128 * block + values.size], values)
    assert result.findings == []


def test_compaction_placing_values_at_the_inclusive_scan_is_off_by_one(rng):
    result, expected = run_compaction(rng, BUG)
    first = result.outputs["kept"][: expected[0].size]
    assert not np.array_equal(first, expected[0])


@pytest.mark.parametrize("name", ["cg_scan", "tile64", "warp_aggregated_atomics"])
def test_the_cooperative_groups_headers_they_include_are_allowed(name):
    assert include_problem(source(name), f"{name}.cu") is None


@pytest.mark.parametrize("name", KERNELS)
def test_each_kernel_says_what_it_computes_and_plants_its_bug(name):
    text = source(name)
    assert text.startswith("// ") and "Planted bug:" in text.split("\n\n")[0]
    assert "PLANTED_BUG" in text
