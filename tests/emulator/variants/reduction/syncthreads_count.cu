// reduction variant: __syncthreads_count tells the block how many threads hold data; a block
// with none leaves (uniformly); the tree only covers the populated prefix.
__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float partial[BLOCK];
    const int t = threadIdx.x;
    const int first = blockIdx.x * BLOCK + t;
    float s = 0.0f;
    for (int i = first; i < n; i += gridDim.x * BLOCK) s += x[i];
    partial[t] = s;
    const int busy = __syncthreads_count(first < n);
    if (busy == 0) return;
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if (t < half && t + half < busy) partial[t] += partial[t + half];
        __syncthreads();
    }
    if (t == 0) atomicAdd(sum, partial[0]);
}
