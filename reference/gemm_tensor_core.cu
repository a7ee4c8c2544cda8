// gemm_tensor_core reference: C = A B with half inputs and float accumulation on tensor cores.
// A block of WARPS_M x WARPS_N warps owns a BM x BN tile of C; each warp owns FRAG_M x FRAG_N
// 16 x 16 accumulator fragments. Per BK-deep step the block stages a BM x BK tile of A and a
// BK x BN tile of B in shared memory (16-byte loads where the rows allow it, zero-filled
// elementwise loads at the edges), double-buffered: the next step's tiles are fetched into
// registers while the current ones feed the tensor cores, so one barrier per step suffices.
// Shared rows are padded by 8 halves so that fragment loads do not collide on banks.
// The defaults (8 warps as 2 x 4, each 64 x 32, two blocks per multiprocessor) are the
// fastest of the configurations measured on the H200 (bench/references/results.md).

#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef FRAG_M
#define FRAG_M 4
#endif
#ifndef FRAG_N
#define FRAG_N 2
#endif
#ifndef BK
#define BK 32
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2  // resident blocks per multiprocessor the register allocation must allow
#endif

constexpr int BM = 16 * FRAG_M * WARPS_M;
constexpr int BN = 16 * FRAG_N * WARPS_N;
constexpr int NT = 32 * WARPS_M * WARPS_N;
constexpr int LDA = BK + 8;                        // shared row lengths, in halves
constexpr int LDB = BN + 8;
constexpr int A_CHUNKS = BM * BK / 8 / NT;         // 16-byte chunks per thread per step
constexpr int B_CHUNKS = BK * BN / 8 / NT;
static_assert(BM * BK % (8 * NT) == 0 && BK * BN % (8 * NT) == 0, "tiles must split evenly");
static_assert(BK % 16 == 0, "BK must be a multiple of 16");

union Chunk {
    uint4 bits;
    __half h[8];
};

// Eight halves of row r, columns c .. c + 7 of a rows x cols matrix X (ld = cols), 0 outside.
__device__ __forceinline__ uint4 fetch_chunk(const __half* __restrict__ X, int rows, int cols,
                                             int r, int c) {
    Chunk chunk;
    if (r < rows && c + 8 <= cols && cols % 8 == 0) {
        chunk.bits = *reinterpret_cast<const uint4*>(X + r * cols + c);
    } else {
        #pragma unroll
        for (int e = 0; e < 8; ++e)
            chunk.h[e] = r < rows && c + e < cols ? X[r * cols + c + e] : __float2half(0.0f);
    }
    return chunk.bits;
}

__device__ __forceinline__ void fetch(uint4* ra, uint4* rb, const __half* __restrict__ A,
                                      const __half* __restrict__ B, int M, int N, int K,
                                      int row0, int col0, int k0, int tid) {
    #pragma unroll
    for (int f = 0; f < A_CHUNKS; ++f) {
        int q = tid + f * NT;
        ra[f] = fetch_chunk(A, M, K, row0 + q / (BK / 8), k0 + q % (BK / 8) * 8);
    }
    #pragma unroll
    for (int f = 0; f < B_CHUNKS; ++f) {
        int q = tid + f * NT;
        rb[f] = fetch_chunk(B, K, N, k0 + q / (BN / 8), col0 + q % (BN / 8) * 8);
    }
}

__device__ __forceinline__ void stage(__half (*sA)[LDA], __half (*sB)[LDB], const uint4* ra,
                                      const uint4* rb, int tid) {
    #pragma unroll
    for (int f = 0; f < A_CHUNKS; ++f) {
        int q = tid + f * NT;
        *reinterpret_cast<uint4*>(&sA[q / (BK / 8)][q % (BK / 8) * 8]) = ra[f];
    }
    #pragma unroll
    for (int f = 0; f < B_CHUNKS; ++f) {
        int q = tid + f * NT;
        *reinterpret_cast<uint4*>(&sB[q / (BN / 8)][q % (BN / 8) * 8]) = rb[f];
    }
}

__global__ void __launch_bounds__(NT, MIN_BLOCKS)
gemm_tensor_core(const half* __restrict__ A, const half* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(128) __half sA[2][BM][LDA];
    __shared__ __align__(128) __half sB[2][BK][LDB];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FRAG_M][FRAG_N];
    #pragma unroll
    for (int i = 0; i < FRAG_M; ++i)
        #pragma unroll
        for (int j = 0; j < FRAG_N; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    uint4 ra[A_CHUNKS], rb[B_CHUNKS];
    fetch(ra, rb, A, B, M, N, K, row0, col0, 0, tid);
    stage(sA[0], sB[0], ra, rb, tid);
    __syncthreads();

    for (int k0 = 0, buf = 0; k0 < K; k0 += BK, buf ^= 1) {
        const bool more = k0 + BK < K;
        if (more) fetch(ra, rb, A, B, M, N, K, row0, col0, k0 + BK, tid);
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[FRAG_M];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[FRAG_N];
            #pragma unroll
            for (int i = 0; i < FRAG_M; ++i)
                wmma::load_matrix_sync(a[i], &sA[buf][(wm * FRAG_M + i) * 16][kk], LDA);
            #pragma unroll
            for (int j = 0; j < FRAG_N; ++j)
                wmma::load_matrix_sync(b[j], &sB[buf][kk][(wn * FRAG_N + j) * 16], LDB);
            #pragma unroll
            for (int i = 0; i < FRAG_M; ++i)
                #pragma unroll
                for (int j = 0; j < FRAG_N; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        if (more) stage(sA[buf ^ 1], sB[buf ^ 1], ra, rb, tid);
        __syncthreads();
    }

    // Whole fragments inside C (with 32-byte aligned rows) go straight to global memory; edge
    // fragments go through a per-warp 16 x 16 scratch in shared memory and a guarded copy.
    float* scratch = reinterpret_cast<float*>(&sA[0][0][0]) + warp * 256;
    #pragma unroll
    for (int i = 0; i < FRAG_M; ++i) {
        #pragma unroll
        for (int j = 0; j < FRAG_N; ++j) {
            int r0 = row0 + (wm * FRAG_M + i) * 16, c0 = col0 + (wn * FRAG_N + j) * 16;
            if (r0 >= M || c0 >= N) continue;
            if (r0 + 16 <= M && c0 + 16 <= N && N % 8 == 0) {
                wmma::store_matrix_sync(C + r0 * N + c0, acc[i][j], N, wmma::mem_row_major);
                continue;
            }
            wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int r = r0 + e / 16, c = c0 + e % 16;
                if (r < M && c < N) C[r * N + c] = scratch[e];
            }
            __syncwarp();
        }
    }
}
