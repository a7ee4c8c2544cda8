// gemm_tiled variant: tiles loaded only inside the matrices (no zero fill); the inner product
// runs over the valid depth of the step only, and only threads that own an output compute.
__global__ void gemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float sA[TILE][TILE];
    __shared__ float sB[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
    const bool owns = i < M && j < N;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        if (i < M && k0 + tx < K) sA[ty][tx] = A[i * K + k0 + tx];
        if (k0 + ty < K && j < N) sB[ty][tx] = B[(k0 + ty) * N + j];
        __syncthreads();
        const int depth = min(TILE, K - k0);
        if (owns)
            for (int k = 0; k < depth; ++k) acc += sA[ty][k] * sB[k][tx];
        __syncthreads();
    }
    if (owns) C[i * N + j] = acc;
}
