// matmul_register_tile variant: the tile as a flat float acc[V * V] indexed in loops the
// compiler is told not to unroll (so it lives in local memory), interleaved rows and columns.
__global__ void matmul_register_tile(const float* A, const float* B, float* C, int M, int N, int K) {
    const int i0 = blockIdx.y * 16 * V + threadIdx.y;
    const int j0 = blockIdx.x * 16 * V + threadIdx.x;
    float acc[V * V];
    #pragma unroll 1
    for (int e = 0; e < V * V; ++e) acc[e] = 0.0f;
    for (int k = 0; k < K; ++k) {
        float a[V], b[V];
        #pragma unroll 1
        for (int p = 0; p < V; ++p) {
            a[p] = i0 + 16 * p < M ? A[k * M + i0 + 16 * p] : 0.0f;
            b[p] = j0 + 16 * p < N ? B[k * N + j0 + 16 * p] : 0.0f;
        }
        #pragma unroll 1
        for (int e = 0; e < V * V; ++e) acc[e] += a[e / V] * b[e % V];
    }
    #pragma unroll 1
    for (int e = 0; e < V * V; ++e) {
        const int i = i0 + 16 * (e / V), j = j0 + 16 * (e % V);
        if (i < M && j < N) C[i * N + j] = acc[e];
    }
}
