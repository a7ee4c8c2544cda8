// vector_add variant: __ldg loads, const locals, an early return, <cuda_fp16.h> included.
#include <cuda_fp16.h>

__global__ void vector_add(const float* a, const float* b, float* c, const int n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float x = __ldg(a + i);
    const float y = __ldg(&b[i]);
    c[i] = x + y;
}
