// Planted bug: thread 0 writes 1 TiB past the array, far outside any allocation.
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    long long far = (i == 0) ? (1LL << 38) : 0;
    if (i < n) {
        c[i + far] = a[i] + b[i];
    }
}
