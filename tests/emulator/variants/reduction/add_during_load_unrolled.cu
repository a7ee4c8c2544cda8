// reduction variant (Harris's kernels 4-6): two elements added during the load, the tree
// unrolled on BLOCK with `if (BLOCK >= ...)`, the last warp with shuffles.
template <unsigned int block_size>
__device__ void block_reduce(float* sdata, unsigned int tid) {
    if (block_size >= 1024) { if (tid < 512) sdata[tid] += sdata[tid + 512]; __syncthreads(); }
    if (block_size >= 512) { if (tid < 256) sdata[tid] += sdata[tid + 256]; __syncthreads(); }
    if (block_size >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
    if (block_size >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
    if (tid < 32) {
        float v = sdata[tid];
        if (block_size >= 64) v += sdata[tid + 32];
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
        if (tid == 0) sdata[0] = v;
    }
}

__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float sdata[BLOCK];
    const unsigned int tid = threadIdx.x;
    float s = 0.0f;
    for (unsigned int i = blockIdx.x * BLOCK * 2 + tid; i < n; i += BLOCK * 2 * gridDim.x) {
        s += x[i];
        if (i + BLOCK < n) s += x[i + BLOCK];
    }
    sdata[tid] = s;
    __syncthreads();
    block_reduce<BLOCK>(sdata, tid);
    if (tid == 0) atomicAdd(sum, sdata[0]);
}
