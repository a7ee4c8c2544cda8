// window_sum variant (costlier traffic): every load reads x at an index clamped to the last input
// (min), so no load needs a guard; the halo is loaded by the last four threads. The last block
// loads its whole tile (repeats of x[n + 3]) where the handout says to fill zeros, so on the
// small safety cases global_load_values is 1.6x the reference: the traffic item is partial.
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    const int t = threadIdx.x, base = blockIdx.x * BLOCK;
    const int last = n + 3;
    tile[t] = x[min(base + t, last)];
    if (t >= BLOCK - 4) tile[t + 4] = x[min(base + t + 4, last)];
    __syncthreads();
    const int i = base + t;
    if (i < n) y[i] = tile[t] + tile[t + 1] + tile[t + 2] + tile[t + 3] + tile[t + 4];
}
