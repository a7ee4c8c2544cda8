// reduction variant: partial sums in double, an inclusive warp scan with __shfl_up_sync (lane 31
// ends with the warp's total), warp totals in shared memory, converted to float once per block.
__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ double warp_totals[BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double v = 0.0;
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) v += (double)x[i];
    for (int d = 1; d < 32; d <<= 1) {
        double up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int w = 0; w < BLOCK / 32; ++w) total += warp_totals[w];
        atomicAdd(sum, (float)total);
    }
}
