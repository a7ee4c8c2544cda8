// matmul_block_tile: C = A^T B (A K x M, B K x N, C M x N, row-major float32),
//   C[i][j] = sum over k of A[k * M + i] * B[k * N + j].
// A block of (L/V) x (L/V) threads owns an L x L tile of C; each thread owns a V x V part of it.
// Launch: block (L/V, L/V), grid (ceil(N / L), ceil(M / L)). Read assignments/matmul_block_tile/README.md.
// BEGIN SOLUTION
//
// matmul_block_tile reference: C = A^T B with two levels of tiling.
// A block of (L/V)^2 threads owns an L x L tile of C; each thread owns V x V of it in registers.
// Per step the block stages an S x L slab of A (rows k0.., columns of its C rows) and one of B
// in shared memory with the strided cooperative loop, zero-filling past the matrix edges.
// Global loads: 2MNK/L; shared-to-register loads: 2MNK/V (plus the edge tiles' share).
// Two refinements that change no count: the next slab is fetched into registers while the
// current one is consumed, and a thread's V rows (columns) are split into runs of four
// consecutive ones (g * 4L/V + 4t + w) so that each run is one 16-byte shared-memory read
// and a warp's reads do not collide on a bank.
// END SOLUTION

#ifndef L
#define L 32  // the grader passes -DL=.. -DV=.. -DS=..
#endif
#ifndef V
#define V 4
#endif
#ifndef S
#define S 8
#endif

// BEGIN SOLUTION
constexpr int TPD = L / V;                       // threads per block side
constexpr int NT = TPD * TPD;                    // threads per block
constexpr int VW = V < 4 ? V : 4;                // values per shared-memory read
constexpr int RUNS = V / VW;                     // runs of VW values per thread side
constexpr int FETCHES = (S * L + NT - 1) / NT;   // slab values per thread per step
static_assert(L % V == 0 && V % VW == 0 && NT <= 1024, "need V | L, V in {1, 2, 4k}, (L/V)^2 <= 1024");

__device__ __forceinline__ void read_run(float* dst, const float* src) {
    if constexpr (VW == 4) {
        float4 v = *reinterpret_cast<const float4*>(src);
        dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
    } else if constexpr (VW == 2) {
        float2 v = *reinterpret_cast<const float2*>(src);
        dst[0] = v.x; dst[1] = v.y;
    } else {
        dst[0] = src[0];
    }
}

// Slab entry q (row q / L, column q % L) of rows k0.. of X (ld columns) from column c0, or 0.
__device__ __forceinline__ void fetch(float* reg, const float* __restrict__ X, int ld, int c0,
                                      int k0, int K, int tid) {
    #pragma unroll
    for (int f = 0; f < FETCHES; ++f) {
        int q = tid + f * NT;
        int k = k0 + q / L, c = c0 + q % L;
        reg[f] = q < S * L && k < K && c < ld ? X[k * ld + c] : 0.0f;
    }
}

__device__ __forceinline__ void stage(float (*slab)[L], const float* reg, int tid) {
    #pragma unroll
    for (int f = 0; f < FETCHES; ++f) {
        int q = tid + f * NT;
        if (q < S * L) slab[q / L][q % L] = reg[f];
    }
}

__global__ void matmul_block_tile(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float sA[S][L];
    __shared__ __align__(16) float sB[S][L];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TPD + tx;
    const int row0 = blockIdx.y * L, col0 = blockIdx.x * L;

    float acc[V][V] = {};
    float ra[FETCHES], rb[FETCHES];
    fetch(ra, A, M, row0, 0, K, tid);
    fetch(rb, B, N, col0, 0, K, tid);
    for (int k0 = 0; k0 < K; k0 += S) {
        stage(sA, ra, tid);
        stage(sB, rb, tid);
        __syncthreads();                  // the slabs are complete before anyone reads them
        if (k0 + S < K) {
            fetch(ra, A, M, row0, k0 + S, K, tid);
            fetch(rb, B, N, col0, k0 + S, K, tid);
        }
        #pragma unroll
        for (int r = 0; r < S; ++r) {
            float a[V], b[V];
            #pragma unroll
            for (int g = 0; g < RUNS; ++g) {
                read_run(a + g * VW, &sA[r][g * TPD * VW + ty * VW]);
                read_run(b + g * VW, &sB[r][g * TPD * VW + tx * VW]);
            }
            #pragma unroll
            for (int p = 0; p < V; ++p)
                #pragma unroll
                for (int q = 0; q < V; ++q) acc[p][q] += a[p] * b[q];
        }
        __syncthreads();                  // everyone is done reading before the slabs are overwritten
    }

    #pragma unroll
    for (int p = 0; p < V; ++p) {
        int i = row0 + (p / VW) * TPD * VW + ty * VW + p % VW;
        #pragma unroll
        for (int q = 0; q < V; ++q) {
            int j = col0 + (q / VW) * TPD * VW + tx * VW + q % VW;
            if (i < M && j < N) C[i * N + j] = acc[p][q];
        }
    }
}
// END SOLUTION
// BEGIN PROMPT
// __global__ void matmul_block_tile(const float* A, const float* B, float* C, int M, int N, int K) {
//     // TODO: __shared__ float sA[S][L], sB[S][L];  float acc[V][V] = {};
//     // TODO: for k0 = 0, S, 2S, ... < K:
//     //         - load sA[r][u] = A[(k0 + r) * M + row0 + u] and sB[r][u] = B[(k0 + r) * N + col0 + u]
//     //           with the strided loop  for (q = tid; q < S * L; q += nt)  (r = q / L, u = q % L),
//     //           writing 0 where k0 + r >= K or the column is outside the matrix;
//     //         - __syncthreads();
//     //         - for r < S: read your V values of sA[r] and of sB[r], add their outer product to acc;
//     //         - __syncthreads();  (before the next step overwrites the slabs)
//     // TODO: write the acc entries that fall inside the M x N output.
// }
// END PROMPT
