// Stream compaction per block with cooperative groups: each block copies its BLOCK inputs to
// shared memory with cg::memcpy_async (a ragged last block copies fewer) and waits for them
// with cg::wait, the block (one tile of BLOCK threads, with block_tile_memory) finds each kept
// value's place with cg::inclusive_scan of the keep flags, and the kept values (those above
// `threshold`) are written in order at the start of the block's segment of `kept`; `counts`
// gets how many each block kept.
// Planted bug: the inclusive scan is used as the position itself (it counts the value being
// placed), so every kept value lands one place too far.
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
#include <cooperative_groups/scan.h>

namespace cg = cooperative_groups;

#define BLOCK 128

__global__ void compact(const float* x, float* kept, int* counts, int n, float threshold) {
    __shared__ cg::block_tile_memory<BLOCK> scratch;
    __shared__ float staged[BLOCK];
    cg::thread_block block = cg::this_thread_block(scratch);
    cg::thread_block_tile<BLOCK> tile = cg::tiled_partition<BLOCK>(block);
    int base = blockIdx.x * BLOCK, count = min(BLOCK, n - base);
    cg::memcpy_async(block, staged, x + base, sizeof(float) * count);
    cg::wait(block);
    int t = tile.thread_rank();
    int keep = t < count && staged[t] > threshold;
    int end = cg::inclusive_scan(tile, keep);
#ifdef PLANTED_BUG
    int place = end;
#else
    int place = end - keep;
#endif
    if (keep) kept[base + place] = staged[t];
    if (t == BLOCK - 1) counts[blockIdx.x] = end;
}
