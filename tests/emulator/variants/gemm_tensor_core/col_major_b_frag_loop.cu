// gemm_tensor_core variant: B staged transposed and loaded as a col_major fragment; the 4 warps
// form a 2 x 2 grid of 64 x 64 tiles (4 x 4 fragments); per 16-deep sub-step the 4 A fragments
// are loaded first, then the fragment loop runs j outer (one col_major B fragment), i inner;
// whole in-bounds fragments stored straight to C, edge ones through shared scratch.
#include <mma.h>
#include <cuda_fp16.h>

#define BK 32

__global__ void gemm_tensor_core(const __half* __restrict__ A, const __half* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(32) __half sA[128][BK + 16];
    __shared__ __align__(32) __half sBt[128][BK + 16];   // sBt[n][k] = B[k][n]
    __shared__ __align__(32) float scratch[4][256];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm = warp / 2, wn = warp % 2;
    const int row0 = blockIdx.y * 128, col0 = blockIdx.x * 128;
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) nvcuda::wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < 128 * BK; e += blockDim.x) {
            const int r = e / BK, k = e % BK;
            sA[r][k] = row0 + r < M && k0 + k < K ? A[(row0 + r) * K + k0 + k] : __float2half(0.0f);
            const int kb = e / 128, n = e % 128;
            sBt[n][kb] = k0 + kb < K && col0 + n < N ? B[(k0 + kb) * N + col0 + n] : __float2half(0.0f);
        }
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> a[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                nvcuda::wmma::load_matrix_sync(a[i], &sA[wm * 64 + i * 16][kk], BK + 16);
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::col_major> b;
                nvcuda::wmma::load_matrix_sync(b, &sBt[wn * 64 + j * 16][kk], BK + 16);
                #pragma unroll
                for (int i = 0; i < 4; ++i) nvcuda::wmma::mma_sync(acc[i][j], a[i], b, acc[i][j]);
            }
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r0 = row0 + wm * 64 + i * 16, c0 = col0 + wn * 64 + j * 16;
            if (r0 + 16 <= M && c0 + 16 <= N && N % 8 == 0) {
                nvcuda::wmma::store_matrix_sync(C + r0 * N + c0, acc[i][j], N, nvcuda::wmma::mem_row_major);
            } else if (r0 < M && c0 < N) {
                nvcuda::wmma::store_matrix_sync(scratch[warp], acc[i][j], 16, nvcuda::wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32)
                    if (r0 + e / 16 < M && c0 + e % 16 < N) C[(r0 + e / 16) * N + c0 + e % 16] = scratch[warp][e];
                __syncwarp();
            }
        }
}
