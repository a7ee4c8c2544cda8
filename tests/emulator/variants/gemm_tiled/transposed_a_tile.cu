// gemm_tiled variant: A's tile stored transposed (sAT[k][row]), the product loop counting down.
__global__ void gemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float sAT[TILE][TILE];
    __shared__ float sB[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        sAT[tx][ty] = i < M && k0 + tx < K ? A[i * K + k0 + tx] : 0.0f;
        sB[ty][tx] = k0 + ty < K && j < N ? B[(k0 + ty) * N + j] : 0.0f;
        __syncthreads();
        for (int k = TILE - 1; k >= 0; --k) acc += sAT[k][ty] * sB[k][tx];
        __syncthreads();
    }
    if (i < M && j < N) C[i * N + j] = acc;
}
