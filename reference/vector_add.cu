// vector_add: c[i] = a[i] + b[i] for 0 <= i < n.
// Launch: block 256 threads, grid ceil(n / 256) blocks. Read assignments/vector_add/README.md.
// BEGIN SOLUTION
//
// vector_add reference: one element per thread, guarded against the ragged last block.
//
// With one 4-byte load per input per thread, a multiprocessor full of threads (2048) has only
// 16 KB of loads in flight: too few bytes to cover the DRAM latency at full bandwidth (Little's
// law), so the plain kernel reaches about 80 % of a device copy on the H200. Each thread also
// asks L2 to prefetch the elements AHEAD places further on, which blocks about four waves later
// will add: prefetches hold no registers and return nothing, so they raise the bytes in flight
// without changing the geometry, and the later loads hit in L2 (93-96 % of copy; measured
// in bench/references/results.md).
// END SOLUTION

// BEGIN SOLUTION
#ifndef AHEAD
#define AHEAD (1 << 20)  // elements: 4 MiB of each input, well inside the 50 MB L2
#endif

__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - AHEAD) {
        asm volatile("prefetch.global.L2 [%0];" :: "l"(a + i + AHEAD));
        asm volatile("prefetch.global.L2 [%0];" :: "l"(b + i + AHEAD));
    }
    if (i < n) c[i] = a[i] + b[i];
}
// END SOLUTION
// BEGIN PROMPT
// __global__ void vector_add(const float* a, const float* b, float* c, int n) {
//     // TODO: compute this thread's global index i from blockIdx.x, blockDim.x and threadIdx.x.
//     // TODO: the last block has threads past the end: only threads with i < n may touch memory.
//     // TODO: write c[i] = a[i] + b[i].
// }
// END PROMPT
