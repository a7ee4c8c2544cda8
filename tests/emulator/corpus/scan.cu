// Block-wide inclusive scan: each block writes the running sums of its own BLOCK inputs (a
// ragged last block stops at n). Each warp scans its 32 values with __shfl_up_sync, lane 31
// leaves the warp's total in shared memory, warp 0 scans those totals, and every thread adds
// the totals of the warps before its own.
// Planted bug: the barrier between writing the warp totals and warp 0 reading them is
// missing (a read-after-write race on `totals`).
#define BLOCK 256
#define WARPS (BLOCK / 32)

__device__ float warp_inclusive_scan(float v, int lane, int width) {
    for (int d = 1; d < width; d *= 2) {
        float below = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += below;
    }
    return v;
}

__global__ void block_scan(const float* x, float* y, int n) {
    __shared__ float totals[WARPS];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_inclusive_scan(i < n ? x[i] : 0.0f, lane, 32);
    if (lane == 31) totals[warp] = v;
#ifndef PLANTED_BUG
    __syncthreads();
#endif
    if (warp == 0) {
        float t = warp_inclusive_scan(lane < WARPS ? totals[lane] : 0.0f, lane, WARPS);
        if (lane < WARPS) totals[lane] = t;
    }
    __syncthreads();
    if (warp > 0) v += totals[warp - 1];
    if (i < n) y[i] = v;
}
