// The sum of x[0..n) in one cooperative launch (cudaLaunchCooperativeKernel): every block sums
// a grid-stride share of x, reduces it in shared memory and writes its total to
// partial[blockIdx.x]; grid.sync() then makes every block's total visible, and block 0 adds
// the totals up into *sum.
// Planted bugs: PLANTED_BUG=1 leaves the grid.sync() out, so block 0 may add up totals that
// other blocks have not written yet; PLANTED_BUG=2 puts it inside `if (blockIdx.x != 0)`, so
// block 0 never reaches it and the other blocks wait there for ever (a GPU hangs).
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define BLOCK 256

__device__ float block_sum(float v, float* s) {
    int t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    float total = s[0];
    __syncthreads();  // s is reused by the next call
    return total;
}

__global__ void grid_reduction(const float* x, float* partial, float* sum, int n) {
    __shared__ float s[BLOCK];
    cg::grid_group grid = cg::this_grid();
    float v = 0.0f;
    for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) v += x[i];
    float total = block_sum(v, s);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
#if PLANTED_BUG == 2
    if (blockIdx.x != 0) grid.sync();
#elif PLANTED_BUG != 1
    grid.sync();
#endif
    if (blockIdx.x == 0) {
        float w = 0.0f;
        for (int b = threadIdx.x; b < gridDim.x; b += BLOCK) w += partial[b];
        total = block_sum(w, s);
        if (threadIdx.x == 0) *sum = total;
    }
}
