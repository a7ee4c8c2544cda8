// matmul_block_tile variant: two slab pairs, one barrier per step (the next slabs are written
// into the other pair while this pair is read), a thread's tile interleaved by L / V.
constexpr int TPD = L / V;
constexpr int NT = TPD * TPD;

__device__ void load_slabs(float (*sA)[L], float (*sB)[L], const float* A, const float* B,
                           int M, int N, int K, int row0, int col0, int k0, int tid) {
    for (int e = tid; e < S * L; e += NT) {
        const int k = k0 + e / L, c = e % L;
        sA[e / L][c] = k < K && row0 + c < M ? A[k * M + row0 + c] : 0.0f;
        sB[e / L][c] = k < K && col0 + c < N ? B[k * N + col0 + c] : 0.0f;
    }
}

__global__ void matmul_block_tile(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ float sA[2][S][L];
    __shared__ float sB[2][S][L];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TPD + tx;
    const int row0 = blockIdx.y * L, col0 = blockIdx.x * L;
    float acc[V][V] = {};
    load_slabs(sA[0], sB[0], A, B, M, N, K, row0, col0, 0, tid);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += S, buf ^= 1) {
        if (k0 + S < K) load_slabs(sA[buf ^ 1], sB[buf ^ 1], A, B, M, N, K, row0, col0, k0 + S, tid);
        #pragma unroll
        for (int r = 0; r < S; ++r) {
            float a[V], b[V];
            #pragma unroll
            for (int p = 0; p < V; ++p) a[p] = sA[buf][r][ty + p * TPD];
            #pragma unroll
            for (int q = 0; q < V; ++q) b[q] = sB[buf][r][tx + q * TPD];
            #pragma unroll
            for (int p = 0; p < V; ++p)
                #pragma unroll
                for (int q = 0; q < V; ++q) acc[p][q] += a[p] * b[q];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int p = 0; p < V; ++p)
        #pragma unroll
        for (int q = 0; q < V; ++q) {
            const int i = row0 + ty + p * TPD, j = col0 + tx + q * TPD;
            if (i < M && j < N) C[i * N + j] = acc[p][q];
        }
}
