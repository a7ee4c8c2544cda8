// matmul_block_tile: C = A^T B (A K x M, B K x N, C M x N, row-major float32),
//   C[i][j] = sum over k of A[k * M + i] * B[k * N + j].
// A block of (L/V) x (L/V) threads owns an L x L tile of C; each thread owns a V x V part of it.
// Launch: block (L/V, L/V), grid (ceil(N / L), ceil(M / L)). Read assignments/matmul_block_tile/README.md.

#ifndef L
#define L 32  // the grader passes -DL=.. -DV=.. -DS=..
#endif
#ifndef V
#define V 4
#endif
#ifndef S
#define S 8
#endif

__global__ void matmul_block_tile(const float* A, const float* B, float* C, int M, int N, int K) {
    // TODO: __shared__ float sA[S][L], sB[S][L];  float acc[V][V] = {};
    // TODO: for k0 = 0, S, 2S, ... < K:
    //         - load sA[r][u] = A[(k0 + r) * M + row0 + u] and sB[r][u] = B[(k0 + r) * N + col0 + u]
    //           with the strided loop  for (q = tid; q < S * L; q += nt)  (r = q / L, u = q % L),
    //           writing 0 where k0 + r >= K or the column is outside the matrix;
    //         - __syncthreads();
    //         - for r < S: read your V values of sA[r] and of sB[r], add their outer product to acc;
    //         - __syncthreads();  (before the next step overwrites the slabs)
    // TODO: write the acc entries that fall inside the M x N output.
}
