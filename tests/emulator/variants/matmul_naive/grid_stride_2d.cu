// matmul_naive variant: 2-D grid-stride loops, __ldg, #pragma unroll 4, extern "C".
extern "C" __global__ void matmul_naive(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C, int M, int N, int K) {
    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < M; i += gridDim.y * blockDim.y) {
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < N; j += gridDim.x * blockDim.x) {
            float acc = 0.0f;
            #pragma unroll 4
            for (int k = 0; k < K; ++k) acc = fmaf(__ldg(&A[k * M + i]), __ldg(&B[k * N + j]), acc);
            C[i * N + j] = acc;
        }
    }
}
