// reduction reference: each thread sums a grid-strided share of x (16-byte loads where it can),
// the block combines its BLOCK partial sums with a shared-memory tree down to 32 values, the
// first warp finishes them with __shfl_down_sync, and one atomicAdd per block adds the block's
// total into sum[0].

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float partial[BLOCK];
    const int t = threadIdx.x;
    const int stride = gridDim.x * BLOCK;
    const int first = blockIdx.x * BLOCK + t;

    float s = 0.0f;
    const float4* x4 = reinterpret_cast<const float4*>(x);  // cudaMalloc'd: 256-byte aligned
    for (int i = first; i < n / 4; i += stride) {
        float4 v = x4[i];
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int i = (n / 4) * 4 + first; i < n; i += stride) s += x[i];

    partial[t] = s;
    __syncthreads();
    #pragma unroll
    for (int half = BLOCK / 2; half >= 32; half /= 2) {
        if (t < half) partial[t] += partial[t + half];
        __syncthreads();
    }
    if (t < 32) {
        float v = partial[t];
        #pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
        if (t == 0) atomicAdd(sum, v);
    }
}
