// window_sum: y[i] = x[i] + x[i+1] + x[i+2] + x[i+3] + x[i+4] for 0 <= i < n (x has n + 4 elements).
// Launch: block BLOCK threads, grid ceil(n / BLOCK) blocks. Read assignments/window_sum/README.md.

#ifndef BLOCK
#define BLOCK 256  // the grader passes -DBLOCK=T (32, 128 or 256)
#endif

__global__ void window_sum(const float* x, float* y, int n) {
    // TODO: declare a shared tile of BLOCK + 4 floats.
    // TODO: load the block's BLOCK + 4 inputs cooperatively (a strided loop over the tile),
    //       guarding every load against the n + 4 inputs that exist.
    // TODO: one __syncthreads() that every thread of the block reaches.
    // TODO: threads whose output index is < n sum their five tile values and write y.
}
