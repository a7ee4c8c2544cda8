// transpose variant (slow): the classic tile without padding; reading a tile column hits one
// bank TILE / 32 ... 32 ways, which the bank-conflict item charges.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE][TILE];
    int c = blockIdx.x * TILE + threadIdx.x, r = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (c < cols && r + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(r + j) * cols + c];
    __syncthreads();
    c = blockIdx.y * TILE + threadIdx.x;
    r = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (c < rows && r + j < cols) out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
}
