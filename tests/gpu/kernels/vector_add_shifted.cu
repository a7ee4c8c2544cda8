// Planted bug: an off-by-two index that writes c[-2] and c[-1].
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i - 2] = a[i] + b[i];
    }
}
