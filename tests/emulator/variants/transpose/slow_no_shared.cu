// transpose variant (slow): no shared memory; reads are coalesced, writes stride by rows.
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int c = blockIdx.x * TILE + threadIdx.x;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        const int r = blockIdx.y * TILE + j;
        if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
    }
}
