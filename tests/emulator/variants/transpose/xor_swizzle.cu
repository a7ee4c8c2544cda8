// transpose variant: an unpadded tile whose columns are XOR-swizzled by the row index
// (TILE is a power of two), so a tile column spreads over the banks without padding.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE * TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * TILE + tx;
    #pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int r = blockIdx.y * TILE + ty + j;
        if (c < cols && r < rows) tile[(ty + j) * TILE + (tx ^ (ty + j))] = in[r * cols + c];
    }
    __syncthreads();
    const int oc = blockIdx.y * TILE + tx;
    #pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int orow = blockIdx.x * TILE + ty + j;
        if (oc < rows && orow < cols) out[orow * rows + oc] = tile[tx * TILE + ((ty + j) ^ tx)];
    }
}
