// reduction variant: __syncthreads_or decides whether the block has any data, the tree's
// barriers are __syncthreads_and (used as plain barriers).
__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float partial[BLOCK];
    const int t = threadIdx.x, first = blockIdx.x * BLOCK + t;
    float s = 0.0f;
    for (int i = first; i < n; i += gridDim.x * BLOCK) s += x[i];
    partial[t] = s;
    if (!__syncthreads_or(first < n)) return;
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if (t < half) partial[t] += partial[t + half];
        __syncthreads_and(1);
    }
    if (t == 0) atomicAdd(sum, partial[0]);
}
