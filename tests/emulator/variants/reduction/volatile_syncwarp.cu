// reduction variant: tree to 64 values with __syncthreads(), then the first warp finishes
// warp-synchronously through a volatile pointer, with __syncwarp() between every read and
// write (the Volta-safe form of the classic unrolled last warp). Only lanes below the offset
// read, so a 32-thread block stays inside its 32 values.
__device__ void warp_reduce(volatile float* s, int t) {
    float v = s[t];
    if (BLOCK >= 64) { v += s[t + 32]; __syncwarp(); s[t] = v; __syncwarp(); }
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        if (t < offset) v += s[t + offset];
        __syncwarp();
        s[t] = v;
        __syncwarp();
    }
}

extern "C" __global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float partial[BLOCK];
    const int t = threadIdx.x;
    float acc = 0.0f;
    for (int i = blockIdx.x * BLOCK + t; i < n; i += gridDim.x * BLOCK) acc += __ldg(x + i);
    partial[t] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 32; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t < 32) warp_reduce(partial, t);
    if (t == 0) atomicAdd(sum, partial[0]);
}
