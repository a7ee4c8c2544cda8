// Planted bug: a float stored through a pointer one byte off its alignment.
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float* odd = (float*)((char*)(c + i) + 1);
        *odd = a[i] + b[i];
    }
}
