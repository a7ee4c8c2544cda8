// Prints from thread 0 and stages a block of floats through dynamic shared memory.
__global__ void stage(const float* x, float* y, int n) {
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        tile[k] = x[k];
    }
    __syncthreads();
    if (i < n) {
        y[i] = tile[n - 1 - i];
    }
    if (i == 0) {
        printf("staged %d floats\n", n);
    }
}
