// matmul_naive: C = A^T B with A K x M, B K x N, C M x N, all row-major float32:
//   C[i][j] = sum over k of A[k][i] * B[k][j]   (A[k][i] is A[k * M + i]).
// Launch: block (16, 16), grid (ceil(N / 16), ceil(M / 16)); x runs over columns j.
// Read assignments/matmul_naive/README.md.

__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    // TODO: j (column) from the x coordinates, i (row) from the y coordinates.
    // TODO: threads outside the M x N output do nothing.
    // TODO: accumulate the K products in a register, then write C[i * N + j] once.
}
