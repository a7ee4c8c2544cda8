// vector_add variant: one float4 per thread where the whole quad is inside, scalars for the tail
// (the launch has n / 256 blocks of 256 threads, so a grid-stride loop covers the rest).
__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int n) {
    const int stride = blockDim.x * gridDim.x;
    const int quads = n / 4;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += stride) {
        const float4 x = reinterpret_cast<const float4*>(a)[q];
        const float4 y = reinterpret_cast<const float4*>(b)[q];
        reinterpret_cast<float4*>(c)[q] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (int i = quads * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) c[i] = a[i] + b[i];
}
