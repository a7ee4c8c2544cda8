// matmul_block_tile variant: a thread owns V consecutive rows and columns, the slabs are
// filled with a strided loop over the block's threads, scalar shared reads, two barriers.
#define NT ((L / V) * (L / V))

__global__ void matmul_block_tile(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ float sA[S][L];
    __shared__ float sB[S][L];
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int row0 = blockIdx.y * L, col0 = blockIdx.x * L;
    float acc[V][V];
    #pragma unroll
    for (int p = 0; p < V; ++p)
        #pragma unroll
        for (int q = 0; q < V; ++q) acc[p][q] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += S) {
        for (int e = tid; e < S * L; e += NT) {
            int k = k0 + e / L, c = e % L;
            sA[e / L][c] = k < K && row0 + c < M ? A[k * M + row0 + c] : 0.0f;
            sB[e / L][c] = k < K && col0 + c < N ? B[k * N + col0 + c] : 0.0f;
        }
        __syncthreads();
        for (int r = 0; r < S; ++r) {
            float a[V], b[V];
            #pragma unroll
            for (int p = 0; p < V; ++p) a[p] = sA[r][threadIdx.y * V + p];
            #pragma unroll
            for (int q = 0; q < V; ++q) b[q] = sB[r][threadIdx.x * V + q];
            #pragma unroll
            for (int p = 0; p < V; ++p)
                #pragma unroll
                for (int q = 0; q < V; ++q) acc[p][q] += a[p] * b[q];
        }
        __syncthreads();
    }
    for (int p = 0; p < V; ++p) {
        int i = row0 + threadIdx.y * V + p;
        for (int q = 0; q < V; ++q) {
            int j = col0 + threadIdx.x * V + q;
            if (i < M && j < N) C[i * N + j] = acc[p][q];
        }
    }
}
