// Rows of 64 values, each handled by a cooperative-groups tile of 64 threads (two warps),
// with block_tile_memory: a tile larger than a warp keeps its barrier and exchange slots in
// the block's reserved shared memory. Each row is shifted so that its maximum (cg::reduce over
// the tile) becomes its last value (tile.shfl from the tile's second warp), then written
// reversed through shared memory, which tile.sync() orders across the tile's two warps. A
// ragged last block's tiles past the last row take part in the collectives but write nothing.
// Planted bug: the tile.sync() between writing the shifted row to shared memory and reading
// it reversed is missing (a race between the tile's two warps).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

#define BLOCK 256
#define ROW 64

__global__ void tile64(const float* x, float* y, int rows) {
    __shared__ cg::block_tile_memory<BLOCK> scratch;
    __shared__ float shifted[BLOCK];
    cg::thread_block block = cg::this_thread_block(scratch);
    cg::thread_block_tile<ROW> tile = cg::tiled_partition<ROW>(block);
    int row = blockIdx.x * (BLOCK / ROW) + tile.meta_group_rank();
    int k = tile.thread_rank();
    bool live = row < rows;
    float v = live ? x[row * ROW + k] : 0.0f;
    float top = cg::reduce(tile, v, cg::greater<float>());
    float last = tile.shfl(v, ROW - 1);
    shifted[threadIdx.x] = v - top + last;
#ifndef PLANTED_BUG
    tile.sync();
#endif
    if (live) y[row * ROW + k] = shifted[threadIdx.x - k + ROW - 1 - k];
}
