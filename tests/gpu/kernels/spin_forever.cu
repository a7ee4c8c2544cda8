// Planted bug: a loop whose exit condition never comes true for a valid n.
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    volatile int k = 0;
    while (k < n + 1) {
        k = (k + 1) % (n + 1);
    }
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
