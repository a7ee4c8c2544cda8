// gemm_tensor_core: C = A B with A M x K and B K x N in half precision, C M x N in float
// (row-major), computed with wmma fragments (16 x 16 x 16) and float accumulation.
// Launch: block 128 threads (4 warps), grid (ceil(N / 128), ceil(M / 128)): a block owns a
// 128 x 128 tile of C; arrange the warps 2 x 2, each owning a 64 x 64 part (4 x 4 fragments).
// The launch also gives each block 71680 bytes of dynamic shared memory (extern __shared__),
// which you may use or ignore.
// Read assignments/gemm_tensor_core/README.md.

#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

__global__ void gemm_tensor_core(const half* A, const half* B, float* C, int M, int N, int K) {
    // TODO: wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][4]; fill with 0.
    // TODO: for k0 = 0, 16, 32, ... < K:
    //         - stage the block's 128 x 16 slice of A and 16 x 128 slice of B in __shared__ half
    //           arrays, 0 outside the matrices (M, N, K need not be multiples of 16);
    //         - __syncthreads();
    //         - each warp loads its 4 A fragments and 4 B fragments (wmma::load_matrix_sync)
    //           and does 16 wmma::mma_sync;
    //         - __syncthreads();
    // TODO: store the fragments (wmma::store_matrix_sync), only the part inside the M x N output.
}
