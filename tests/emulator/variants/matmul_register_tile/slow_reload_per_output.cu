// matmul_register_tile variant (slow): the V x V tile in registers, but every output reloads
// its own A and B values (k innermost), so global loads are V times the reference's.
__global__ void matmul_register_tile(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K) {
    const int i0 = blockIdx.y * 16 * V + threadIdx.y;
    const int j0 = blockIdx.x * 16 * V + threadIdx.x;
    float acc[V][V] = {};
    for (int p = 0; p < V; ++p)
        for (int q = 0; q < V; ++q)
            if (i0 + 16 * p < M && j0 + 16 * q < N)
                for (int k = 0; k < K; ++k) acc[p][q] += A[k * M + i0 + 16 * p] * B[k * N + j0 + 16 * q];
    for (int p = 0; p < V; ++p)
        for (int q = 0; q < V; ++q)
            if (i0 + 16 * p < M && j0 + 16 * q < N) C[(i0 + 16 * p) * N + j0 + 16 * q] = acc[p][q];
}
