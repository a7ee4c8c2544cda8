// reduction variant (slow): no shared memory, one global atomicAdd per element.
__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(sum, x[i]);
}
