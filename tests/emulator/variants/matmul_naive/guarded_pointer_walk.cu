// matmul_naive variant: the guard around the work, pointers walked through A and B.
#include <cstdio>
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    const int col = blockIdx.x * 16 + threadIdx.x;
    const int row = blockIdx.y * 16 + threadIdx.y;
    if (row < M && col < N) {
        const float* a = A + row;
        const float* b = B + col;
        float acc = 0.0f;
        for (int k = K; k > 0; --k, a += M, b += N) acc += *a * *b;
        C[row * N + col] = acc;
    }
}
