// vector_add: c[i] = a[i] + b[i] for 0 <= i < n.
// Launch: block 256 threads, grid ceil(n / 256) blocks. Read assignments/vector_add/README.md.

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    // TODO: compute this thread's global index i from blockIdx.x, blockDim.x and threadIdx.x.
    // TODO: the last block has threads past the end: only threads with i < n may touch memory.
    // TODO: write c[i] = a[i] + b[i].
}
