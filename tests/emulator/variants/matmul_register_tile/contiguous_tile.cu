// matmul_register_tile variant: each thread owns V consecutive rows and V consecutive columns
// (less coalesced than the interleaved layout, same number of loads).
__global__ void matmul_register_tile(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K) {
    const int i0 = (blockIdx.y * 16 + threadIdx.y) * V;
    const int j0 = (blockIdx.x * 16 + threadIdx.x) * V;
    float acc[V][V];
    for (int p = 0; p < V; ++p)
        for (int q = 0; q < V; ++q) acc[p][q] = 0.0f;
    for (int k = 0; k < K; ++k) {
        float a[V], b[V];
        #pragma unroll
        for (int p = 0; p < V; ++p) a[p] = i0 + p < M ? __ldg(&A[k * M + i0 + p]) : 0.0f;
        #pragma unroll
        for (int q = 0; q < V; ++q) b[q] = j0 + q < N ? __ldg(&B[k * N + j0 + q]) : 0.0f;
        #pragma unroll
        for (int p = 0; p < V; ++p)
            #pragma unroll
            for (int q = 0; q < V; ++q) acc[p][q] = fmaf(a[p], b[q], acc[p][q]);
    }
    for (int p = 0; p < V && i0 + p < M; ++p)
        for (int q = 0; q < V && j0 + q < N; ++q) C[(i0 + p) * N + j0 + q] = acc[p][q];
}
