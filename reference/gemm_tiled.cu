// gemm_tiled: C = A B with A M x K, B K x N, C M x N (row-major float32),
//   C[i][j] = sum over k of A[i * K + k] * B[k * N + j],
// one output per thread, the block's operands staged through TILE x TILE shared-memory tiles.
// Launch: block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE)). Read assignments/gemm_tiled/README.md.
// BEGIN SOLUTION
//
// gemm_tiled reference: C = A B, one output per thread, TILE x TILE shared-memory tiles.
// Each step loads one A and one B value per thread (coalesced along rows), so global loads
// total 2MNK/TILE; the next step's two values are fetched into registers while the current
// tiles are consumed. sA[ty][k] is a broadcast within a warp row, sB[k][tx] is conflict-free.
// END SOLUTION

#ifndef TILE
#define TILE 16  // the grader passes -DTILE=8, 16 or 32
#endif

// BEGIN SOLUTION
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
// END SOLUTION
// BEGIN PROMPT
// __global__ void gemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
//     // TODO: __shared__ float sA[TILE][TILE], sB[TILE][TILE];
//     // TODO: for each TILE-wide step t along K: every thread loads one value of A's tile and one
//     //       of B's tile (0 outside the matrices), __syncthreads(), adds TILE products to its
//     //       sum, __syncthreads() again before the next step overwrites the tiles.
//     // TODO: threads inside the M x N output write C[i * N + j].
// }
// END PROMPT
