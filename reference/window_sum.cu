// window_sum reference: the block stages its BLOCK + 4 inputs in shared memory once, then every
// thread sums five neighbouring tile values. Loads are guarded against the n + 4 inputs, stores
// against the n outputs, and every thread reaches the single barrier.

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    int t = threadIdx.x;
    int base = blockIdx.x * BLOCK;

    for (int q = t; q < BLOCK + 4; q += BLOCK) {
        int g = base + q;
        tile[q] = g < n + 4 ? x[g] : 0.0f;
    }
    __syncthreads();

    if (base + t < n) {
        float sum = 0.0f;
        #pragma unroll
        for (int d = 0; d < 5; ++d) sum += tile[t + d];
        y[base + t] = sum;
    }
}
