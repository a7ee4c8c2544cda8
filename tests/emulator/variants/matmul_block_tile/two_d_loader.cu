// matmul_block_tile variant: the slabs filled with 2-D loops (rows by threadIdx.y, columns by
// threadIdx.x), reads of a thread's V rows through a pointer, acc zeroed in a loop.
constexpr int TPD = L / V;

__global__ void matmul_block_tile(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ float sA[S][L], sB[S][L];
    const int row0 = blockIdx.y * L, col0 = blockIdx.x * L;
    float acc[V][V];
    for (int p = 0; p < V * V; ++p) acc[p / V][p % V] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += S) {
        for (int r = threadIdx.y; r < S; r += TPD)
            for (int c = threadIdx.x; c < L; c += TPD) {
                const bool in_k = k0 + r < K;
                sA[r][c] = in_k && row0 + c < M ? A[(k0 + r) * M + row0 + c] : 0.0f;
                sB[r][c] = in_k && col0 + c < N ? B[(k0 + r) * N + col0 + c] : 0.0f;
            }
        __syncthreads();
        for (int r = 0; r < S; ++r) {
            const float* a_row = &sA[r][threadIdx.y * V];
            const float* b_row = &sB[r][threadIdx.x * V];
            float a[V], b[V];
            #pragma unroll
            for (int p = 0; p < V; ++p) { a[p] = a_row[p]; b[p] = b_row[p]; }
            #pragma unroll
            for (int p = 0; p < V; ++p)
                #pragma unroll
                for (int q = 0; q < V; ++q) acc[p][q] += a[p] * b[q];
        }
        __syncthreads();
    }
    for (int p = 0; p < V; ++p)
        for (int q = 0; q < V; ++q) {
            const int i = row0 + threadIdx.y * V + p, j = col0 + threadIdx.x * V + q;
            if (i < M && j < N) C[i * N + j] = acc[p][q];
        }
}
