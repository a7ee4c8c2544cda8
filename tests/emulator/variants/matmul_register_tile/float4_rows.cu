// matmul_register_tile variant: V consecutive columns per thread read as one float4 when the
// row is 16-byte aligned and fully inside B (N % 4 == 0), scalar otherwise.
extern "C" __global__ void matmul_register_tile(const float* __restrict__ A, const float* __restrict__ B,
                                                float* __restrict__ C, int M, int N, int K) {
    const int i0 = blockIdx.y * 16 * V + threadIdx.y;          // rows i0 + 16p (interleaved)
    const int j0 = (blockIdx.x * 16 + threadIdx.x) * V;        // columns j0 .. j0 + V - 1
    float acc[V][V] = {};
    const bool vec = V == 4 && N % 4 == 0 && j0 + 3 < N;
    for (int k = 0; k < K; ++k) {
        float a[V], b[V];
        #pragma unroll
        for (int p = 0; p < V; ++p) a[p] = i0 + 16 * p < M ? A[k * M + i0 + 16 * p] : 0.0f;
        if (vec) {
            float4 v = *reinterpret_cast<const float4*>(&B[k * N + j0]);
            b[0] = v.x; b[1] = v.y; b[2 % V] = v.z; b[3 % V] = v.w;
        } else {
            #pragma unroll
            for (int q = 0; q < V; ++q) b[q] = j0 + q < N ? B[k * N + j0 + q] : 0.0f;
        }
        #pragma unroll
        for (int p = 0; p < V; ++p)
            #pragma unroll
            for (int q = 0; q < V; ++q) acc[p][q] += a[p] * b[q];
    }
    #pragma unroll
    for (int p = 0; p < V; ++p)
        #pragma unroll
        for (int q = 0; q < V; ++q)
            if (i0 + 16 * p < M && j0 + q < N) C[(i0 + 16 * p) * N + j0 + q] = acc[p][q];
}
