// reduction variant: __shfl_down_sync inside every warp first, one value per warp in shared
// memory, the first warp reduces those with shuffles again.
#include <cstdio>

__inline__ __device__ float warp_sum(float v) {
    #pragma unroll
    for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    return v;
}

__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float warp_sums[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += x[i];
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) atomicAdd(sum, v);
    }
}
