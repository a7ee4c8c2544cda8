// reduction variant: every thread adds its partial sum into one shared float with atomicAdd.
__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float block_sum;
    if (threadIdx.x == 0) block_sum = 0.0f;
    __syncthreads();
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i];
    atomicAdd(&block_sum, s);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(sum, block_sum);
}
