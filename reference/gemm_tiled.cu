// gemm_tiled reference: C = A B, one output per thread, TILE x TILE shared-memory tiles.
// Each step loads one A and one B value per thread (coalesced along rows), so global loads
// total 2MNK/TILE; the next step's two values are fetched into registers while the current
// tiles are consumed. sA[ty][k] is a broadcast within a warp row, sB[k][tx] is conflict-free.

#ifndef TILE
#define TILE 16
#endif

__global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                           float* __restrict__ C, int M, int N, int K) {
    __shared__ float sA[TILE][TILE];
    __shared__ float sB[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;

    float a = i < M && tx < K ? A[i * K + tx] : 0.0f;
    float b = ty < K && j < N ? B[ty * N + j] : 0.0f;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        sA[ty][tx] = a;
        sB[ty][tx] = b;
        __syncthreads();
        int next = k0 + TILE;
        if (next < K) {
            a = i < M && next + tx < K ? A[i * K + next + tx] : 0.0f;
            b = next + ty < K && j < N ? B[(next + ty) * N + j] : 0.0f;
        }
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += sA[ty][k] * sB[k][tx];
        __syncthreads();
    }
    if (i < M && j < N) C[i * N + j] = acc;
}
