// gemm_tensor_core variant: no block-wide staging and no __syncthreads at all. Each of the 4
// warps owns 32 rows x 128 columns (2 x 8 fragments); where a 16 x 16 tile lies inside the
// matrix with 32-byte aligned rows (K or N a multiple of 16) the fragment is loaded straight
// from global memory, otherwise the warp copies it zero-filled into its own shared scratch
// (__syncwarp only). Row fragments entirely below M are skipped, and a warp with none leaves.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

// The 16 x 16 tile of X (rows x cols) at (r0, c0) into frag: straight from global memory when it
// lies inside with 32-byte aligned rows, otherwise through the warp's zero-filled scratch.
template <typename Frag>
__device__ void load_tile(Frag& frag, half* scratch, const half* X, int rows, int cols, int r0, int c0,
                          int lane) {
    if (r0 + 16 <= rows && c0 + 16 <= cols && cols % 16 == 0) {
        wmma::load_matrix_sync(frag, X + r0 * cols + c0, cols);
        return;
    }
    for (int e = lane; e < 256; e += 32) {
        int r = r0 + e / 16, c = c0 + e % 16;
        scratch[e] = r < rows && c < cols ? X[r * cols + c] : __float2half(0.0f);
    }
    __syncwarp();
    wmma::load_matrix_sync(frag, scratch, 16);
    __syncwarp();
}

__global__ void gemm_tensor_core(const half* A, const half* B, float* C, int M, int N, int K) {
    __shared__ __align__(32) half scratch_a[4][256];
    __shared__ __align__(32) half scratch_b[4][256];
    __shared__ __align__(32) float scratch_c[4][256];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r0 = blockIdx.y * 128 + warp * 32;
    const int col0 = blockIdx.x * 128;
    if (r0 >= M) return;  // no block barrier in this kernel: whole warps may leave
    const int frags_m = r0 + 16 < M ? 2 : 1;  // row fragments of this warp that touch A / C
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][8];
    #pragma unroll
    for (int i = 0; i < 2; ++i)
        #pragma unroll
        for (int j = 0; j < 8; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[2];
        for (int i = 0; i < frags_m; ++i) load_tile(a[i], scratch_a[warp], A, M, K, r0 + i * 16, k0, lane);
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int c0 = col0 + j * 16;
            if (c0 >= N) break;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
            load_tile(b, scratch_b[warp], B, K, N, k0, c0, lane);
            for (int i = 0; i < frags_m; ++i) wmma::mma_sync(acc[i][j], a[i], b, acc[i][j]);
        }
    }
    for (int i = 0; i < frags_m; ++i) {
        const int ri = r0 + i * 16;
        for (int j = 0; j < 8; ++j) {
            const int c0 = col0 + j * 16;
            if (c0 >= N) break;
            wmma::store_matrix_sync(scratch_c[warp], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32)
                if (ri + e / 16 < M && c0 + e % 16 < N) C[(ri + e / 16) * N + c0 + e % 16] = scratch_c[warp][e];
            __syncwarp();
        }
    }
}
