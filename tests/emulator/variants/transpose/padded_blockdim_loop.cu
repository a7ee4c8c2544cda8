// transpose variant: TILE + 1 padding, loops stepping by blockDim.y, extern "C", __restrict__.
extern "C" __global__ void transpose(const float* __restrict__ in, float* __restrict__ out,
                                     int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = threadIdx.y; j < TILE; j += blockDim.y, y += blockDim.y)
        if (x < cols && y < rows) tile[j][threadIdx.x] = in[(size_t)y * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = threadIdx.y; j < TILE; j += blockDim.y, y += blockDim.y)
        if (x < rows && y < cols) out[(size_t)y * rows + x] = tile[threadIdx.x][j];
}
