// reduction variant: grid-stride partial sums, the classic halving loop down to one value
// with __syncthreads() inside the loop, one atomicAdd per block.
__global__ void reduction(const float* x, float* sum, int n) {
    __shared__ float sdata[BLOCK];
    unsigned int tid = threadIdx.x;
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) s += x[i];
    sdata[tid] = s;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) sdata[tid] += sdata[tid + stride];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(sum, sdata[0]);
}
