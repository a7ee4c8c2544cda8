// Planted bug: reads past the end and before the start of its inputs (within the GPU backend's
// canary zones), one of them multiplied by 0 as a careless kernel might. Both backends read
// the contract's undefined byte there, so their outputs agree bit for bit.
__global__ void read_past(const float* a, const int* k, float* c, int* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[n + i];                     // past the end
        c[n + i] = a[i] + 0.0f * a[i - n];   // before the start, times 0: still NaN
        d[i] = k[n + i] + 1;                 // an int past the end: -1 + 1
    }
}
