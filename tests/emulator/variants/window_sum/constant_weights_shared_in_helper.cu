// window_sum variant: the five weights in __constant__ memory, the tile declared inside a
// device function, a pointer into the tile for the window.
__constant__ float weights[5] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};

__device__ float* stage(const float* x, int n, int base, int t) {
    __shared__ float tile[BLOCK + 4];
    for (int q = t; q < BLOCK + 4; q += BLOCK) tile[q] = base + q < n + 4 ? x[base + q] : 0.0f;
    return tile;
}

__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    const int t = threadIdx.x, base = blockIdx.x * BLOCK;
    const float* tile = stage(x, n, base, t);
    __syncthreads();
    if (base + t >= n) return;  // after the only barrier: safe
    const float* w = tile + t;
    float s = 0.0f;
    int d = 0;
    while (d < 5) { s += weights[d] * w[d]; ++d; }
    y[base + t] = s;
}
