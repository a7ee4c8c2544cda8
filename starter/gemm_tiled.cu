// gemm_tiled: C = A B with A M x K, B K x N, C M x N (row-major float32),
//   C[i][j] = sum over k of A[i * K + k] * B[k * N + j],
// one output per thread, the block's operands staged through TILE x TILE shared-memory tiles.
// Launch: block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE)). Read assignments/gemm_tiled/README.md.

#ifndef TILE
#define TILE 16  // the grader passes -DTILE=8, 16 or 32
#endif

__global__ void gemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    // TODO: __shared__ float sA[TILE][TILE], sB[TILE][TILE];
    // TODO: for each TILE-wide step t along K: every thread loads one value of A's tile and one
    //       of B's tile (0 outside the matrices), __syncthreads(), adds TILE products to its
    //       sum, __syncthreads() again before the next step overwrites the tiles.
    // TODO: threads inside the M x N output write C[i * N + j].
}
