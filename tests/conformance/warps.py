"""Warp-level instructions under every kind of participation: each warp of a launch has its
own pattern of lanes that exited early, lanes that branched away, and member masks that split
the rest (by a label, as ``cg::labeled_partition`` does), so that shuffles, votes, ballots,
matches, reductions and ``activemask`` run with full, partial, split and single-lane masks.
Results the ISA leaves undefined (a shuffle that reads a lane not in its mask) are not
compared: ``shfl_defined`` works out which."""

from __future__ import annotations

import numpy as np

WARPS = 16  # 2 blocks of 256 threads
SHUFFLES = ("up", "down", "bfly", "idx")

SOURCE = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

// Each lane: leaves at once (gone), skips the collective (off), or takes part with the lanes of
// its warp that carry its label (the member mask: the active lanes with the same label).
#define TAKE_PART(t) \
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x; \
    if (gone[t]) return; \
    if (!on[t]) return; \
    const unsigned member = __match_any_sync(__activemask(), label[t]);

#define SHUFFLE(mode) \
extern "C" __global__ void shfl_##mode(const unsigned* gone, const unsigned* on, const unsigned* label, \
        const unsigned* v, const unsigned* b, const unsigned* c, unsigned* d, unsigned* p) { \
    TAKE_PART(t) \
    unsigned r, q; \
    asm volatile("{ .reg .pred %%sp; shfl.sync." #mode ".b32 %0|%%sp, %2, %3, %4, %5; " \
                 "selp.u32 %1, 1, 0, %%sp; }" \
                 : "=r"(r), "=r"(q) : "r"(v[t]), "r"(b[t]), "r"(c[t]), "r"(member)); \
    d[t] = r; p[t] = q; \
}
SHUFFLE(up) SHUFFLE(down) SHUFFLE(bfly) SHUFFLE(idx)

extern "C" __global__ void votes(const unsigned* gone, const unsigned* on, const unsigned* label,
        const unsigned* v, unsigned* all, unsigned* any, unsigned* uni, unsigned* ballot, unsigned* active) {
    TAKE_PART(t)
    const bool x = v[t] & 1;
    all[t] = __all_sync(member, x);
    any[t] = __any_sync(member, x);
    uni[t] = __uni_sync(member, x);
    ballot[t] = __ballot_sync(member, x);
    active[t] = __activemask();
}

extern "C" __global__ void reductions(const unsigned* gone, const unsigned* on, const unsigned* label,
        const unsigned* v, unsigned* add, unsigned* umin, unsigned* umax, int* smin, int* smax,
        unsigned* band, unsigned* bor, unsigned* bxor) {
    TAKE_PART(t)
    add[t] = __reduce_add_sync(member, v[t]);
    umin[t] = __reduce_min_sync(member, v[t]);
    umax[t] = __reduce_max_sync(member, v[t]);
    smin[t] = __reduce_min_sync(member, (int)v[t]);
    smax[t] = __reduce_max_sync(member, (int)v[t]);
    band[t] = __reduce_and_sync(member, v[t]);
    bor[t] = __reduce_or_sync(member, v[t]);
    bxor[t] = __reduce_xor_sync(member, v[t]);
}

extern "C" __global__ void matches(const unsigned* gone, const unsigned* on, const unsigned* label,
        const unsigned* v, unsigned* any32, unsigned* all32, unsigned* pred32, unsigned* any64,
        unsigned* all64) {
    TAKE_PART(t)
    const unsigned x = v[t] & 3;  // few values: lanes agree often
    int pred;
    any32[t] = __match_any_sync(member, x);
    all32[t] = __match_all_sync(member, x, &pred);
    pred32[t] = pred;
    const unsigned long long y = (unsigned long long)(v[t] & 1) << 40 | 7;
    any64[t] = __match_any_sync(member, y);
    all64[t] = __match_all_sync(member, y, &pred);
}

extern "C" __global__ void groups(const unsigned* gone, const unsigned* on, const unsigned* label,
        const unsigned* v, int* sum, int* part_rank, int* part_size, int* tile_sum, unsigned* tile_shfl) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    cg::thread_block_tile<8> tile = cg::tiled_partition<8>(cg::this_thread_block());  // every lane
    tile_sum[t] = cg::reduce(tile, (int)v[t], cg::plus<int>());
    tile_shfl[t] = tile.shfl_down(v[t], 3);
    if (gone[t] || !on[t]) return;
    cg::coalesced_group part = cg::labeled_partition(cg::coalesced_threads(), label[t]);
    sum[t] = cg::reduce(part, (int)v[t], cg::plus<int>());
    part_rank[t] = part.thread_rank();
    part_size[t] = part.size();
}
"""


def participation(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``gone``, ``on`` and ``label`` for 16 warps: warp 0 every lane with one label, warp 1
    the upper half gone, warp 2 every other lane off, warp 3 one lane, then random ones."""
    n = WARPS * 32
    gone = (rng.random(n) < 0.2).astype(np.uint32)
    on = (rng.random(n) < 0.7).astype(np.uint32)
    label = rng.integers(0, 3, n, dtype=np.uint32)
    gone[:32], on[:32], label[:32] = 0, 1, 0
    gone[32:64], on[32:64] = np.arange(32) >= 16, 1
    gone[64:96], on[64:96] = 0, np.arange(32) % 2
    gone[96:128], on[96:128] = 0, np.arange(32) == 5
    return {"gone": gone, "on": on, "label": label}


def member_masks(lanes: dict[str, np.ndarray]) -> np.ndarray:
    """Each lane's member mask, as the kernels work it out (0 for lanes that take no part)."""
    taking = (lanes["gone"] == 0) & (lanes["on"] == 1)
    masks = np.zeros(taking.size, np.uint32)
    for t in np.flatnonzero(taking):
        warp = slice(t // 32 * 32, t // 32 * 32 + 32)
        same = taking[warp] & (lanes["label"][warp] == lanes["label"][t])
        masks[t] = sum(1 << j for j in np.flatnonzero(same))
    return masks


def shfl_defined(mode: str, b: np.ndarray, c: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Where a shuffle's result is defined: lanes that take part and read a lane of their mask,
    or no lane at all (out of their segment: they keep their own value). The PTX ISA's rule."""
    lane = np.arange(masks.size) % 32
    bval, clamp, segmask = b.astype(np.int64) & 31, c.astype(np.int64) & 31, (c.astype(np.int64) >> 8) & 31
    min_lane = lane & segmask
    max_lane = min_lane | (clamp & ~segmask)
    j = {"up": lane - bval, "down": lane + bval, "bfly": lane ^ bval, "idx": min_lane | (bval & ~segmask)}[
        mode
    ]
    inside = j >= max_lane if mode == "up" else j <= max_lane
    reads_member = (masks >> np.where(inside, j, lane).astype(np.uint32)) & 1
    return (masks != 0) & (~inside | (reads_member == 1))
