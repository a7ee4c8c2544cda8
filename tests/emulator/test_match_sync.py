"""``match.any.sync`` and ``match.all.sync`` (``__match_any_sync``, ``__match_all_sync``):
b32 and b64 values, full and partial member masks, lanes of divergent branches, exited
lanes and a partial last warp, each against a numpy reference; and their counters, which
are those of the other warp collectives (one warp instruction, no memory traffic)."""

from __future__ import annotations

import numpy as np

from autograder.contract import Buffer, Scalar

from .helpers import launch, line_of, out

MATCH = r"""
extern "C" __global__ void match(const int* x, const long long* w, unsigned* any, unsigned* all,
                                 int* same, unsigned* any64, unsigned* halves) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    any[t] = __match_any_sync(__activemask(), x[t]);
    int p;
    all[t] = __match_all_sync(__activemask(), x[t] / 4, &p);
    same[t] = p;
    any64[t] = __match_any_sync(__activemask(), w[t]);
    unsigned half = threadIdx.x % 32 < 16 ? 0x0000ffffu : 0xffff0000u;
    halves[t] = __match_any_sync(half, x[t]);
}
"""


def lanes_of(tid: np.ndarray) -> np.ndarray:
    return (tid % 32).astype(np.uint32)


def expected_any(values, tid, present, masks):
    """Per lane: the bits of the present lanes of its warp in its mask with its value."""
    warp, lane = tid // 32, lanes_of(tid)
    result = np.zeros(tid.size, np.uint32)
    for i in np.flatnonzero(present):
        peers = present & (warp == warp[i]) & (values == values[i])
        bits = np.bitwise_or.reduce(np.uint32(1) << lane[peers], initial=np.uint32(0))
        result[i] = bits & masks[i]
    return result


def expected_all(values, tid, present, masks):
    warp, lane = tid // 32, lanes_of(tid)
    result, same = np.zeros(tid.size, np.uint32), np.zeros(tid.size, np.int32)
    for i in np.flatnonzero(present):
        members = present & (warp == warp[i]) & ((masks[i] >> lane) & 1 == 1)
        same[i] = (values[members] == values[i]).all()
        result[i] = (
            np.bitwise_or.reduce(np.uint32(1) << lane[members], initial=np.uint32(0)) if same[i] else 0
        )
    return result, same


def run_match(rng, threads: int):
    n = threads
    x = rng.integers(0, 12, n).astype(np.int32)
    x[32:64] = 5  # a warp where every lane holds the same value: match.all is true there
    w = rng.integers(0, 3, n).astype(np.int64) << 33  # equal in their low 32 bits
    w[::5] += 7
    outputs = [out(name, n, np.uint32) for name in ("any", "all")]
    outputs += [out("same", n, np.int32), out("any64", n, np.uint32), out("halves", n, np.uint32)]
    result = launch(MATCH, "match", 1, threads, [Buffer("x", x), Buffer("w", w), *outputs])
    return result, x, w


def test_match_any_and_all_against_numpy_with_a_partial_last_warp(rng):
    threads = 112  # three full warps and one of 16 lanes
    result, x, w = run_match(rng, threads)
    tid = np.arange(threads)
    present = np.ones(threads, bool)
    active = np.where(tid // 32 < 3, 0xFFFFFFFF, 0xFFFF).astype(np.uint32)
    o = result.outputs
    np.testing.assert_array_equal(o["any"], expected_any(x, tid, present, active))
    all_bits, same = expected_all(x // 4, tid, present, active)
    np.testing.assert_array_equal(o["all"], all_bits)
    np.testing.assert_array_equal(o["same"], same)
    assert same[32:64].all() and not same[:32].any()  # both outcomes are exercised
    np.testing.assert_array_equal(o["any64"], expected_any(w, tid, present, active))  # all 64 bits
    halves = np.where(tid % 32 < 16, 0x0000FFFF, 0xFFFF0000).astype(np.uint32)
    np.testing.assert_array_equal(o["halves"], expected_any(x, tid, present, halves))
    assert result.findings == []


EXITED = r"""
extern "C" __global__ void exited(const int* x, unsigned* all, int* same, unsigned* any) {
    int t = threadIdx.x;
    if (t >= 16) return;
    int p;
    all[t] = __match_all_sync(0xffffffffu, x[t], &p);
    same[t] = p;
    any[t] = __match_any_sync(0xffffffffu, x[t]);
}
"""


def test_exited_lanes_of_the_mask_take_no_part_as_on_an_h200():
    # an H200 read, for lanes 0 and 1: all 0x0000ffff, true, any 0x0000ffff with equal values;
    # all 0, false, any 0x00009249 and 0x00002492 with the values i % 3
    for x, all_bits, same, any_bits in (
        (np.full(32, 7), 0xFFFF, 1, [0xFFFF, 0xFFFF]),
        (np.arange(32) % 3, 0, 0, [0x9249, 0x2492]),
    ):
        outputs = [out("all", 32, np.uint32), out("same", 32, np.int32), out("any", 32, np.uint32)]
        result = launch(EXITED, "exited", 1, 32, [Buffer("x", x.astype(np.int32)), *outputs]).outputs
        assert (result["all"][:16] == all_bits).all() and (result["same"][:16] == same).all()
        np.testing.assert_array_equal(result["any"][:2], any_bits)


DIVERGENT = r"""
extern "C" __global__ void diverge(const int* x, unsigned* r, unsigned* all, int n) {
    int t = threadIdx.x;
    if (t >= n) return;  // exited lanes take no part
    int v = x[t];
    int p;
    if (v % 3 == 0) {
        r[t] = __match_any_sync(__activemask(), v);
        all[t] = __match_all_sync(0xffffffffu, v % 3, &p);  // 0 in every lane of the branch
    } else {
        r[t] = __match_any_sync(__activemask(), v) | 0x1;  // another PC: its own group
        all[t] = __match_all_sync(0xffffffffu, v % 2, &p) | 0x2;
    }
}
"""


def test_lanes_of_divergent_branches_and_exited_lanes_take_no_part(rng):
    # the emulator's limit (collective.py): an H200 matches the lanes of both branches
    n = int(rng.integers(40, 64))  # the second warp has exited lanes
    x = rng.integers(0, 9, 64).astype(np.int32)
    result = launch(
        DIVERGENT,
        "diverge",
        1,
        64,
        [Buffer("x", x), out("r", 64, np.uint32), out("all", 64, np.uint32), Scalar("n", n)],
    )
    tid = np.arange(64)
    live = tid < n
    first = live & (x % 3 == 0)
    full = np.full(64, 0xFFFFFFFF, np.uint32)
    expected = np.where(first, 0, expected_any(x, tid, live & ~first, full) | 1).astype(np.uint32)
    expected[first] = expected_any(x, tid, first, full)[first]
    np.testing.assert_array_equal(result.outputs["r"][:n], expected[:n])
    np.testing.assert_array_equal(result.outputs["all"][first], expected_any(x % 3, tid, first, full)[first])
    bits, _ = expected_all(x % 2, tid, live & ~first, full)
    np.testing.assert_array_equal(result.outputs["all"][live & ~first], bits[live & ~first] | 2)


def test_labeled_partition_groups_the_lanes_of_equal_labels(rng):
    source = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void label(const int* x, unsigned* rank, unsigned* size) {
    int t = threadIdx.x;
    cg::coalesced_group g = cg::labeled_partition(cg::tiled_partition<32>(cg::this_thread_block()), x[t]);
    rank[t] = g.thread_rank();
    size[t] = g.size();
}
"""
    x = rng.integers(0, 5, 96).astype(np.int32)
    result = launch(
        source, "label", 1, 96, [Buffer("x", x), out("rank", 96, np.uint32), out("size", 96, np.uint32)]
    )
    for t in range(96):
        warp = slice(t // 32 * 32, t)
        assert result.outputs["rank"][t] == np.count_nonzero(x[warp] == x[t])  # equal labels below it
        assert result.outputs["size"][t] == np.count_nonzero(x[t // 32 * 32 : t // 32 * 32 + 32] == x[t])


def test_a_match_counts_as_a_shuffle_does_one_warp_instruction_and_no_memory(rng):
    source = r"""
extern "C" __global__ void m(const int* x, unsigned* y) {
    unsigned v = x[threadIdx.x], r, s;
    asm volatile("match.any.sync.b32 %0, %1, -1;" : "=r"(r) : "r"(v));  // match
    asm volatile("shfl.sync.idx.b32 %0, %1, 0, 31, -1;" : "=r"(s) : "r"(v));  // shuffle
    y[threadIdx.x] = r + s;
}
"""
    x = rng.integers(0, 4, 96).astype(np.int32)
    result = launch(source, "m", 2, 96, [Buffer("x", x), out("y", 192, np.uint32)])
    match = result.counters.by_line[line_of(source, "// match")]
    assert match == result.counters.by_line[line_of(source, "// shuffle")]
    assert match["warp_instructions"] == 6 and match["lane_instructions"] == 192
    assert not any(v for k, v in match.items() if k.startswith(("global_", "shared_")))
