// matmul_block_tile variant: slab rows read from global memory as float4 when M and N are
// multiples of 4 (16-byte aligned rows) and the quad is inside the matrix, zero-filled scalars
// otherwise; scalar shared reads with each thread's rows interleaved by L / V.
#define TPD (L / V)

__device__ __forceinline__ void load_quad(float* dst, const float* X, int ld, int k, int c, int K) {
    if (k < K && c + 3 < ld && ld % 4 == 0) {
        float4 v = *reinterpret_cast<const float4*>(X + k * ld + c);
        dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
    } else {
        for (int w = 0; w < 4; ++w) dst[w] = k < K && c + w < ld ? X[k * ld + c + w] : 0.0f;
    }
}

__global__ void matmul_block_tile(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float sA[S][L];
    __shared__ __align__(16) float sB[S][L];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TPD + tx;
    const int row0 = blockIdx.y * L, col0 = blockIdx.x * L;
    float acc[V][V] = {};
    for (int k0 = 0; k0 < K; k0 += S) {
        for (int q = tid; q < S * L / 4; q += TPD * TPD) {
            const int r = q / (L / 4), c = q % (L / 4) * 4;
            load_quad(&sA[r][c], A, M, k0 + r, row0 + c, K);
            load_quad(&sB[r][c], B, N, k0 + r, col0 + c, K);
        }
        __syncthreads();
        #pragma unroll
        for (int r = 0; r < S; ++r) {
            float a[V], b[V];
            #pragma unroll
            for (int p = 0; p < V; ++p) a[p] = sA[r][ty + p * TPD];
            #pragma unroll
            for (int q = 0; q < V; ++q) b[q] = sB[r][tx + q * TPD];
            #pragma unroll
            for (int p = 0; p < V; ++p)
                #pragma unroll
                for (int q = 0; q < V; ++q) acc[p][q] += a[p] * b[q];
        }
        __syncthreads();
    }
    for (int p = 0; p < V; ++p)
        for (int q = 0; q < V; ++q) {
            const int i = row0 + ty + p * TPD, j = col0 + tx + q * TPD;
            if (i < M && j < N) C[i * N + j] = acc[p][q];
        }
}
