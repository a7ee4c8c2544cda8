// vector_add variant: an assert on the launch shape, a __noinline__ helper (a real call).
#include <cassert>
#include <cstdio>

__device__ __noinline__ float add(float a, float b) { return a + b; }

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    assert(blockDim.x == 256);
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)n) c[i] = add(a[i], b[i]);
    else if (n < 0) printf("negative n %d\n", n);
}
