// window_sum variant: a block-uniform grid-stride loop over tiles, two barriers per tile.
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    const int t = threadIdx.x;
    for (int base = blockIdx.x * BLOCK; base < n; base += gridDim.x * BLOCK) {
        tile[t] = base + t < n + 4 ? x[base + t] : 0.0f;
        if (t < 4) tile[BLOCK + t] = base + BLOCK + t < n + 4 ? x[base + BLOCK + t] : 0.0f;
        __syncthreads();
        if (base + t < n) {
            float s = 0.0f;
            #pragma unroll
            for (int d = 0; d < 5; ++d) s += tile[t + d];
            y[base + t] = s;
        }
        __syncthreads();
    }
}
