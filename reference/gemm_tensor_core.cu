// gemm_tensor_core: C = A B with A M x K and B K x N in half precision, C M x N in float
// (row-major), computed with wmma fragments (16 x 16 x 16) and float accumulation.
// Launch: block 128 threads (4 warps), grid (ceil(N / 128), ceil(M / 128)): a block owns a
// 128 x 128 tile of C; arrange the warps 2 x 2, each owning a 64 x 64 part (4 x 4 fragments).
// The launch also gives each block 71680 bytes of dynamic shared memory (extern __shared__),
// which you may use or ignore.
// Read assignments/gemm_tensor_core/README.md.
// BEGIN SOLUTION
//
// gemm_tensor_core reference: C = A B with half inputs and float accumulation on tensor cores.
// A block of WARPS_M x WARPS_N warps owns a BM x BN tile of C; each warp owns FRAG_M x FRAG_N
// 16 x 16 accumulator fragments. The K dimension is swept in BK-deep steps through a ring of
// STAGES shared-memory buffers (the launch's dynamic shared memory) filled with cp.async:
// while the tensor cores work on step s, the copies for steps s + 1 .. s + STAGES - 1 are in
// flight, and one barrier per step both publishes step s and frees the buffer of step s - 1
// for refilling. 16-byte copies are used where the rows allow them (zero-filled past the
// edge); rows whose length is not a multiple of 8 halves are staged element by element.
// Shared rows are padded by 8 halves so that fragment loads do not collide on banks.
// Dynamic shared memory needed: STAGES * (BM * (BK + 8) + BK * (BN + 8)) * 2 bytes.
// The defaults (4 warps as 2 x 2, each 64 x 64, BK = 64, two buffers, three blocks per
// multiprocessor) are the fastest configuration measured on the H200: 71 680 bytes of dynamic
// shared memory per block (bench/references/results.md).
// END SOLUTION

#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

// BEGIN SOLUTION
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef FRAG_M
#define FRAG_M 4
#endif
#ifndef FRAG_N
#define FRAG_N 4
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 3  // resident blocks per multiprocessor the register allocation must allow
#endif

constexpr int BM = 16 * FRAG_M * WARPS_M;
constexpr int BN = 16 * FRAG_N * WARPS_N;
constexpr int NT = 32 * WARPS_M * WARPS_N;
constexpr int LDA = BK + 8;  // shared row lengths, in halves
constexpr int LDB = BN + 8;
constexpr int A_STAGE = BM * LDA;  // halves per buffer
constexpr int B_STAGE = BK * LDB;
static_assert(BM * BK % (8 * NT) == 0 && BK * BN % (8 * NT) == 0, "tiles must split evenly");
static_assert(NT % (BK / 8) == 0 && NT % (BN / 8) == 0, "threads must cover whole slice rows");
static_assert(BK % 16 == 0 && STAGES >= 2, "BK must be a multiple of 16, STAGES at least 2");

// Copy halves c .. c + 7 of row r of a rows x cols matrix X into dst (16 bytes of shared
// memory), 0 outside X. Rows of a multiple of 8 halves go by one asynchronous 16-byte copy.
__device__ __forceinline__ void copy_chunk(__half* dst, const __half* __restrict__ X, int rows,
                                           int cols, int r, int c) {
    if (cols % 8 == 0) {
        const bool inside = r < rows && c < cols;
        const __half* src = inside ? X + (size_t)r * cols + c : X;
        unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                     :: "r"(to), "l"(src), "r"(inside ? 16 : 0));
    } else {
        #pragma unroll
        for (int e = 0; e < 8; ++e)
            dst[e] = r < rows && c + e < cols ? X[(size_t)r * cols + c + e] : __float2half(0.0f);
    }
}

// Start filling one buffer with the BM x BK slice of A and the BK x BN slice of B at k0:
// thread tid copies the chunks at rows tid / (BK / 8) + f * NT / (BK / 8) of the A slice
// (column tid % (BK / 8) * 8), and likewise for B, so only k0 changes from step to step.
__device__ __forceinline__ void load_stage(__half* sA, __half* sB, const __half* __restrict__ A,
                                           const __half* __restrict__ B, int M, int N, int K,
                                           int row0, int col0, int k0, int tid) {
    constexpr int A_ROW = BK / 8, B_ROW = BN / 8;  // chunks per row of each slice
    const int ra = tid / A_ROW, ca = tid % A_ROW * 8, rb = tid / B_ROW, cb = tid % B_ROW * 8;
    #pragma unroll
    for (int f = 0; f < BM * BK / 8 / NT; ++f) {
        const int r = ra + f * (NT / A_ROW);
        copy_chunk(sA + r * LDA + ca, A, M, K, row0 + r, k0 + ca);
    }
    #pragma unroll
    for (int f = 0; f < BK * BN / 8 / NT; ++f) {
        const int r = rb + f * (NT / B_ROW);
        copy_chunk(sB + r * LDB + cb, B, K, N, k0 + r, col0 + cb);
    }
}

__global__ void __launch_bounds__(NT, MIN_BLOCKS)
gemm_tensor_core(const half* __restrict__ A, const half* __restrict__ B,
                 float* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(128) __half smem[];
    __half* sA = smem;                    // STAGES buffers of BM x LDA
    __half* sB = smem + STAGES * A_STAGE;  // STAGES buffers of BK x LDB
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int steps = (K + BK - 1) / BK;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FRAG_M][FRAG_N];
    #pragma unroll
    for (int i = 0; i < FRAG_M; ++i)
        #pragma unroll
        for (int j = 0; j < FRAG_N; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // One commit group per step (empty past the last step keeps the count uniform).
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < steps) load_stage(sA + s * A_STAGE, sB + s * B_STAGE, A, B, M, N, K, row0, col0, s * BK, tid);
        asm volatile("cp.async.commit_group;");
    }
    for (int step = 0; step < steps; ++step) {
        asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 2));  // my copies of `step` landed
        __syncthreads();  // everyone's landed, and everyone is done with step - 1's buffer
        const int next = step + STAGES - 1;
        if (next < steps) {
            const int buf = next % STAGES;
            load_stage(sA + buf * A_STAGE, sB + buf * B_STAGE, A, B, M, N, K, row0, col0, next * BK, tid);
        }
        asm volatile("cp.async.commit_group;");

        const __half* a_tile = sA + step % STAGES * A_STAGE + wm * FRAG_M * 16 * LDA;
        const __half* b_tile = sB + step % STAGES * B_STAGE + wn * FRAG_N * 16;
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[FRAG_M];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[FRAG_N];
            #pragma unroll
            for (int i = 0; i < FRAG_M; ++i) wmma::load_matrix_sync(a[i], a_tile + i * 16 * LDA + kk, LDA);
            #pragma unroll
            for (int j = 0; j < FRAG_N; ++j) wmma::load_matrix_sync(b[j], b_tile + kk * LDB + j * 16, LDB);
            #pragma unroll
            for (int i = 0; i < FRAG_M; ++i)
                #pragma unroll
                for (int j = 0; j < FRAG_N; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
    }
    asm volatile("cp.async.wait_all;");
    __syncthreads();  // the buffers become per-warp scratch tiles below

    // Whole fragments inside C (with 32-byte aligned rows) go straight to global memory; edge
    // fragments go through a per-warp 16 x 16 scratch in shared memory and a guarded copy.
    float* scratch = reinterpret_cast<float*>(smem) + warp * 256;
    #pragma unroll
    for (int i = 0; i < FRAG_M; ++i) {
        #pragma unroll
        for (int j = 0; j < FRAG_N; ++j) {
            int r0 = row0 + (wm * FRAG_M + i) * 16, c0 = col0 + (wn * FRAG_N + j) * 16;
            if (r0 >= M || c0 >= N) continue;
            if (r0 + 16 <= M && c0 + 16 <= N && N % 8 == 0) {
                wmma::store_matrix_sync(C + (size_t)r0 * N + c0, acc[i][j], N, wmma::mem_row_major);
                continue;
            }
            wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int r = r0 + e / 16, c = c0 + e % 16;
                if (r < M && c < N) C[(size_t)r * N + c] = scratch[e];
            }
            __syncwarp();
        }
    }
}
// END SOLUTION
// BEGIN PROMPT
// __global__ void gemm_tensor_core(const half* A, const half* B, float* C, int M, int N, int K) {
//     // TODO: wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][4]; fill with 0.
//     // TODO: for k0 = 0, 16, 32, ... < K:
//     //         - stage the block's 128 x 16 slice of A and 16 x 128 slice of B in __shared__ half
//     //           arrays, 0 outside the matrices (M, N, K need not be multiples of 16);
//     //         - __syncthreads();
//     //         - each warp loads its 4 A fragments and 4 B fragments (wmma::load_matrix_sync)
//     //           and does 16 wmma::mma_sync;
//     //         - __syncthreads();
//     // TODO: store the fragments (wmma::store_matrix_sync), only the part inside the M x N output.
// }
// END PROMPT
