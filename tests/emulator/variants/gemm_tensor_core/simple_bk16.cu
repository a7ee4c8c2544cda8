// gemm_tensor_core variant: 4 warps, warp w owns rows 32w..32w+31 of the 128 x 128 block tile
// (2 row fragments) and all 8 of its 16 x 16 column fragments: 2 x 8 accumulators. Per 16-deep
// step the block stages A and B elementwise (zero-filled, stride blockDim.x) in shared memory,
// two barriers per step; every fragment is stored through a per-warp float scratch and copied
// out with a guard.
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

__global__ void gemm_tensor_core(const half* A, const half* B, float* C, int M, int N, int K) {
    __shared__ __align__(32) half sA[128][16];
    __shared__ __align__(32) half sB[16][128];
    __shared__ __align__(32) float scratch[4][16 * 16];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = blockIdx.y * 128, col0 = blockIdx.x * 128;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][8];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 8; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int e = threadIdx.x; e < 128 * 16; e += blockDim.x) {
            int r = e / 16, k = e % 16;
            sA[r][k] = row0 + r < M && k0 + k < K ? A[(row0 + r) * K + k0 + k] : __float2half(0.0f);
            int kb = e / 128, c = e % 128;
            sB[kb][c] = k0 + kb < K && col0 + c < N ? B[(k0 + kb) * N + col0 + c] : __float2half(0.0f);
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[2];
        for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &sA[warp * 32 + i * 16][0], 16);
        for (int j = 0; j < 8; ++j) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
            wmma::load_matrix_sync(b, &sB[0][j * 16], 128);
            for (int i = 0; i < 2; ++i) wmma::mma_sync(acc[i][j], a[i], b, acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 8; ++j) {
            wmma::store_matrix_sync(scratch[warp], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int r = row0 + warp * 32 + i * 16 + e / 16, c = col0 + j * 16 + e % 16;
                if (r < M && c < N) C[r * N + c] = scratch[warp][e];
            }
            __syncwarp();
        }
}
