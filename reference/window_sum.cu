// window_sum: y[i] = x[i] + x[i+1] + x[i+2] + x[i+3] + x[i+4] for 0 <= i < n (x has n + 4 elements).
// Launch: block BLOCK threads, grid ceil(n / BLOCK) blocks. Read assignments/window_sum/README.md.
// BEGIN SOLUTION
//
// window_sum reference: the block stages its BLOCK + 4 inputs in shared memory once, then every
// thread sums five neighbouring tile values. Loads are guarded against the n + 4 inputs, stores
// against the n outputs, and every thread reaches the single barrier.
//
// As in vector_add, one 4-byte load per thread keeps too few bytes in flight to reach the
// memory bandwidth, so each thread also asks L2 to prefetch the input AHEAD places further on,
// which a block about four waves later will stage (bench/references/results.md).
// END SOLUTION

#ifndef BLOCK
#define BLOCK 256  // the grader passes -DBLOCK=T (32, 128 or 256)
#endif
// BEGIN SOLUTION
static_assert(BLOCK >= 4, "two rounds of the loop must cover BLOCK + 4 inputs");
#ifndef AHEAD
#define AHEAD (1 << 20)  // elements: 4 MiB ahead, well inside the 50 MB L2
#endif

__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    int t = threadIdx.x;
    int base = blockIdx.x * BLOCK;

    if (base + t < n + 4 - AHEAD) asm volatile("prefetch.global.L2 [%0];" :: "l"(x + base + t + AHEAD));
    // The strided cooperative loop, its loads issued before its stores: the four threads that
    // also fetch a halo element then wait for both loads at once, not one after the other.
    float v[2];
    #pragma unroll
    for (int k = 0; k < 2; ++k) {
        int q = t + k * BLOCK, g = base + q;
        v[k] = q < BLOCK + 4 && g < n + 4 ? x[g] : 0.0f;
    }
    #pragma unroll
    for (int k = 0; k < 2; ++k)
        if (t + k * BLOCK < BLOCK + 4) tile[t + k * BLOCK] = v[k];
    __syncthreads();

    if (base + t < n) {
        float sum = 0.0f;
        #pragma unroll
        for (int d = 0; d < 5; ++d) sum += tile[t + d];
        y[base + t] = sum;
    }
}
// END SOLUTION
// BEGIN PROMPT
//
// __global__ void window_sum(const float* x, float* y, int n) {
//     // TODO: declare a shared tile of BLOCK + 4 floats.
//     // TODO: load the block's BLOCK + 4 inputs cooperatively (a strided loop over the tile),
//     //       guarding every load against the n + 4 inputs that exist.
//     // TODO: one __syncthreads() that every thread of the block reaches.
//     // TODO: threads whose output index is < n sum their five tile values and write y.
// }
// END PROMPT
