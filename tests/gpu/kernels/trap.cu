// Planted bug: every thread executes a trap instruction (what a failed device assert does).
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __trap();
    }
}
