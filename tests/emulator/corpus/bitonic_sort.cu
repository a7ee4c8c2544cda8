// Bitonic sort of each block's BLOCK keys in shared memory, ascending: a ragged last block
// pads with +infinity, which sorts to its end, and writes back only its own keys. Each
// compare-and-swap step is done by the lower thread of each pair, then the block synchronises.
// Planted bug: the barrier after each step is missing, so a step reads keys that other
// threads wrote in the step before (a shared-memory race).
#define BLOCK 256

__global__ void bitonic_sort(const float* keys, float* sorted, int n) {
    __shared__ float s[BLOCK];
    int t = threadIdx.x, i = blockIdx.x * BLOCK + t;
    s[t] = i < n ? keys[i] : __int_as_float(0x7f800000);
    __syncthreads();
    for (int size = 2; size <= BLOCK; size *= 2) {
        for (int stride = size / 2; stride > 0; stride /= 2) {
            int partner = t ^ stride;
            if (partner > t) {
                bool ascending = (t & size) == 0;
                float a = s[t], b = s[partner];
                if ((a > b) == ascending) {
                    s[t] = b;
                    s[partner] = a;
                }
            }
#ifndef PLANTED_BUG
            __syncthreads();
#endif
        }
    }
    if (i < n) sorted[i] = s[t];
}
