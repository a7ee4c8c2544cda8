// reduction variant (costlier traffic): the "threadfence reduction" pattern: every block writes its
// partial sum to a __device__ array, fences, takes a ticket; the last block to finish adds all
// partials into sum[0] and resets the ticket counter. Reading the gridDim.x partials back costs
// extra global loads, which on the tiny safety cases (n = 1, 100) is 1.26x the reference.
#define MAX_BLOCKS 2048
__device__ float block_partials[MAX_BLOCKS];
__device__ unsigned int tickets = 0;

__global__ void reduction(const float* __restrict__ x, float* __restrict__ sum, int n) {
    __shared__ float partial[BLOCK];
    __shared__ bool last;
    const int t = threadIdx.x;
    float s = 0.0f;
    for (int i = blockIdx.x * BLOCK + t; i < n; i += gridDim.x * BLOCK) s += x[i];
    partial[t] = s;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) partial[t] += partial[t + half];
        __syncthreads();
    }
    if (t == 0) {
        block_partials[blockIdx.x] = partial[0];
        __threadfence();
        last = atomicInc(&tickets, gridDim.x) == gridDim.x - 1;
    }
    __syncthreads();
    if (last) {
        float v = 0.0f;
        for (int b = t; b < gridDim.x; b += BLOCK) v += *(volatile float*)&block_partials[b];
        partial[t] = v;
        __syncthreads();
        for (int half = BLOCK / 2; half > 0; half >>= 1) {
            if (t < half) partial[t] += partial[t + half];
            __syncthreads();
        }
        if (t == 0) {
            sum[0] += partial[0];
            tickets = 0;
        }
    }
}
