// transpose variant: diagonal block reordering (a grid the kernel remaps), padded tile,
// 64-bit offsets, the loads and stores in helper loops.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    // remap (blockIdx.x, blockIdx.y) to a diagonal order when the grid is square
    int bx = blockIdx.x, by = blockIdx.y;
    if (gridDim.x == gridDim.y) {
        by = blockIdx.x;
        bx = (blockIdx.x + blockIdx.y) % gridDim.x;
    }
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        long r = (long)by * TILE + j, c = (long)bx * TILE + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = in[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        long r = (long)bx * TILE + j, c = (long)by * TILE + threadIdx.x;
        if (r < cols && c < rows) out[r * rows + c] = tile[threadIdx.x][j];
    }
}
