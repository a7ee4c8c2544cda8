// Histogram of keys in [0, BINS), added to the counts already in `hist`: each block counts
// its grid-stride share of the keys in a shared histogram with shared-memory atomics, then
// adds each non-empty bin to `hist` with one global atomic.
// Planted bug: the shared histogram is never zeroed, so each block's counts start from the
// garbage shared memory holds.
#define BINS 64

__global__ void histogram(const int* keys, unsigned* hist, int n) {
    __shared__ unsigned bins[BINS];
#ifndef PLANTED_BUG
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) bins[b] = 0;
#endif
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&bins[keys[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (bins[b] != 0) atomicAdd(&hist[b], bins[b]);
}
