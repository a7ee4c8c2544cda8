// reduction variant: butterfly __shfl_xor_sync (every lane ends with the warp's sum), the
// active mask from __ballot_sync, warp sums combined with atomicAdd on shared memory.
__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float total;
    if (threadIdx.x == 0) total = 0.0f;
    __syncthreads();
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += x[i];
    const unsigned mask = __ballot_sync(0xffffffffu, true);
    for (int lane_mask = 16; lane_mask >= 1; lane_mask /= 2) v += __shfl_xor_sync(mask, v, lane_mask);
    if ((threadIdx.x & 31) == 0) atomicAdd(&total, v);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(sum, total);
}
