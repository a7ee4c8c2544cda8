// window_sum variant: thread t loads tile entries 2t and 2t+1 (half the threads load), only
// inside x (no zero fill); only tile entries that were loaded are ever read.
extern "C" __global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    const int t = threadIdx.x;
    const int base = blockIdx.x * BLOCK;
    for (int q = 2 * t; q < 2 * t + 2 && q < BLOCK + 4; ++q)
        if (base + q < n + 4) tile[q] = __ldg(&x[base + q]);
    __syncthreads();
    if (base + t < n) {
        float s = 0.0f;
        for (int d = 4; d >= 0; --d) s += tile[t + d];
        y[base + t] = s;
    }
}
