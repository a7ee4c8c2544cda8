// The dot product of two bf16 vectors x and y of length n, added into *result (which starts
// at 0): each product is taken in bf16 (__hmul2 on pairs of elements, __hmul on an odd last
// one), each thread sums its products in float, each block sums its threads' in shared
// memory, and one atomicAdd per block adds the block's sum.
// PLANTED_BUG: each thread sums its products in bf16 rather than float; once its sum passes
// a few hundred, adding a product under half a bf16 ulp of it changes nothing, so long sums
// stall far below the answer.
#include <cuda_bf16.h>

#define THREADS 64

extern "C" __global__ void bf16_dot(const __nv_bfloat16* x, const __nv_bfloat16* y, float* result, int n) {
    __shared__ float partial[THREADS];
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(x);
    const __nv_bfloat162* y2 = reinterpret_cast<const __nv_bfloat162*>(y);
    int t = threadIdx.x;
#ifdef PLANTED_BUG
    __nv_bfloat16 sum = __float2bfloat16(0.0f);
#else
    float sum = 0.0f;
#endif
    for (int i = blockIdx.x * THREADS + t; i < n / 2; i += gridDim.x * THREADS) {
        __nv_bfloat162 p = __hmul2(x2[i], y2[i]);
#ifdef PLANTED_BUG
        sum = __hadd(sum, __hadd(__low2bfloat16(p), __high2bfloat16(p)));
#else
        sum += __low2float(p) + __high2float(p);
#endif
    }
    if (n % 2 && blockIdx.x == 0 && t == 0) {
#ifdef PLANTED_BUG
        sum = __hadd(sum, __hmul(x[n - 1], y[n - 1]));
#else
        sum += __bfloat162float(__hmul(x[n - 1], y[n - 1]));
#endif
    }
    partial[t] = sum;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (t < stride) partial[t] += partial[t + stride];
        __syncthreads();
    }
    if (t == 0) atomicAdd(result, partial[0]);
}
