// C = A B on tensor cores through inline PTX: A is M x K and B is K x N, both row-major
// __half, C is M x N float. Each block of four warps stages a 32 x 16 tile of A and a
// 16 x 16 tile of B in shared memory (zero past the edges, so any M, N, K work); each warp
// loads its fragments with ldmatrix (A as four 8 x 8 matrices, B as two, transposed into
// mma's column layout) and accumulates a 16 x 8 tile of C with mma.sync.m16n8k16 (f16
// inputs, f32 accumulators), whose fragment layout the PTX ISA specifies.
// PLANTED_BUG: the barrier between staging the tiles and ldmatrix is missing, so warps
// read rows that other warps may not have written yet (a shared-memory race).
// PLANTED_BUG_FRAGMENT: A's fragment registers 1 and 2 are swapped, so rows 8-15 of the
// tile meet columns 0-7 where they should meet 8-15 (a wrong answer).
#include <cuda_fp16.h>

#define TILE_M 32
#define TILE_N 16
#define TILE_K 16
#define PAD 8  // halves after each row: rows stay 16-byte aligned and ldmatrix conflict-free

__device__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

extern "C" __global__ void mma_gemm(const __half* A, const __half* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) __half As[TILE_M][TILE_K + PAD];
    __shared__ __align__(16) __half Bs[TILE_K][TILE_N + PAD];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row0 = blockIdx.y * TILE_M, col0 = blockIdx.x * TILE_N;
    int wm = (warp / 2) * 16, wn = (warp % 2) * 8;  // this warp's 16 x 8 tile of the block's
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        for (int i = threadIdx.x; i < TILE_M * TILE_K; i += blockDim.x) {
            int r = i / TILE_K, c = i % TILE_K;
            bool inside = row0 + r < M && k0 + c < K;
            As[r][c] = inside ? A[(row0 + r) * K + k0 + c] : __float2half(0.0f);
        }
        for (int i = threadIdx.x; i < TILE_K * TILE_N; i += blockDim.x) {
            int r = i / TILE_N, c = i % TILE_N;
            bool inside = k0 + r < K && col0 + c < N;
            Bs[r][c] = inside ? B[(k0 + r) * N + col0 + c] : __float2half(0.0f);
        }
#ifndef PLANTED_BUG
        __syncthreads();
#endif
        unsigned a[4], b[2];
        // lane l gives row l % 16 of the warp's 16 x 16 A tile, at column 8 (l / 16):
        // matrices 0-3 are rows 0-7 and 8-15 at columns 0-7, then at columns 8-15
        unsigned a_row = shared_address(&As[wm + lane % 16][8 * (lane / 16)]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                     : "r"(a_row));
        // lanes 0-15 give rows k = 0-15 of the warp's 16 x 8 B tile (lanes 16-31: ignored)
        unsigned b_row = shared_address(&Bs[lane % 16][wn]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                     : "=r"(b[0]), "=r"(b[1])
                     : "r"(b_row));
#ifdef PLANTED_BUG_FRAGMENT
        unsigned swap = a[1];
        a[1] = a[2];
        a[2] = swap;
#endif
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        __syncthreads();  // the tiles are read before the next iteration overwrites them
    }
    int group = lane / 4, thread = lane % 4;  // accumulator i: row group + 8 (i / 2),
    for (int i = 0; i < 4; ++i) {             // column 2 thread + i % 2
        int r = row0 + wm + group + 8 * (i / 2), c = col0 + wn + 2 * thread + i % 2;
        if (r < M && c < N) C[r * N + c] = acc[i];
    }
}
