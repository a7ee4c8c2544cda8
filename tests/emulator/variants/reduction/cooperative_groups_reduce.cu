// reduction variant: cooperative groups. Each thread sums a grid-stride slice, cg::reduce
// adds a warp's 32 values (a redux or shuffle tree underneath), warp leaders stage their sums
// in shared memory, block.sync() orders them, and warp 0 reduces those and adds one atomic.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

__global__ void reduction(const float* x, float* sum, int n) {
    __shared__ float partial[BLOCK / 32];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    float v = 0.0f;
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) v += x[i];
    v = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = v;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        float w = warp.thread_rank() < BLOCK / 32 ? partial[warp.thread_rank()] : 0.0f;
        w = cg::reduce(warp, w, cg::plus<float>());
        if (warp.thread_rank() == 0) atomicAdd(sum, w);
    }
}
