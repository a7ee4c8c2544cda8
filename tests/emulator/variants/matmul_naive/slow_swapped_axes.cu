// matmul_naive variant (slow): threadIdx.x walks rows of C, so the stores to C are strided.
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    const int i = blockIdx.y * 16 + threadIdx.x;
    const int j = blockIdx.x * 16 + threadIdx.y;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[k * M + i] * B[k * N + j];
        C[i * N + j] = acc;
    }
}
