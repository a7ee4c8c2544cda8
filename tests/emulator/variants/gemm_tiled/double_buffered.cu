// gemm_tiled variant: two pairs of tiles, one barrier per step: step s multiplies buffer
// s % 2 while buffer (s + 1) % 2 is filled for the next step.
__global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                           float* __restrict__ C, int M, int N, int K) {
    __shared__ float sA[2][TILE][TILE];
    __shared__ float sB[2][TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
    sA[0][ty][tx] = i < M && tx < K ? A[i * K + tx] : 0.0f;
    sB[0][ty][tx] = ty < K && j < N ? B[ty * N + j] : 0.0f;
    __syncthreads();
    float acc = 0.0f;
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int next = k0 + TILE;
        if (next < K) {
            sA[buf ^ 1][ty][tx] = i < M && next + tx < K ? A[i * K + next + tx] : 0.0f;
            sB[buf ^ 1][ty][tx] = next + ty < K && j < N ? B[(next + ty) * N + j] : 0.0f;
        }
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += sA[buf][ty][k] * sB[buf][k][tx];
        __syncthreads();
        buf ^= 1;
    }
    if (i < M && j < N) C[i * N + j] = acc;
}
