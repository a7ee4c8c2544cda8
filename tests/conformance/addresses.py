"""Shared memory addressed through 32-bit registers with offsets, read and written by some lanes.

Each block fills its shared words with values of its own, then each lane takes the 32-bit shared
address of its word and, if its ``on`` flag is set, loads through it at offsets 4, -8 and 124
bytes, loads once more through a register that is both the address and the destination
(``ld.shared.u32 %r, [%r+4]``: the aliased form), and stores at offset 128; after a barrier
every lane reads back what landed. Written as inline PTX, so that the GPU runs exactly these
address forms. Blocks of 100 and 35 threads end in partial warps."""

from __future__ import annotations

SHAPES = ((3, 100), (2, 35), (2, 256))  # (blocks, threads a block)
LOADS = 4  # words each lane loads

SOURCE = r"""
extern "C" __global__ void shared_offsets(const unsigned* on, const unsigned* x, unsigned* loaded,
                                          unsigned* stored)
{
    __shared__ unsigned s[256 + 96];
    unsigned n = blockDim.x, t = threadIdx.x, i = blockIdx.x * n + t;
    for (unsigned k = t; k < n + 96; k += n) s[k] = (k * 2654435761u) ^ blockIdx.x;
    __syncthreads();
    s[t + 32] = x[i];
    __syncthreads();
    unsigned a = (unsigned)__cvta_generic_to_shared(&s[t + 32]);
    if (on[i]) {
        unsigned ahead, behind, far, b = a;
        asm volatile("ld.shared.u32 %0, [%1+4];" : "=r"(ahead) : "r"(a));
        asm volatile("ld.shared.u32 %0, [%1+-8];" : "=r"(behind) : "r"(a));
        asm volatile("ld.shared.u32 %0, [%1+124];" : "=r"(far) : "r"(a));
        asm volatile("ld.shared.u32 %0, [%0+4];" : "+r"(b));
        loaded[4 * i] = ahead;
        loaded[4 * i + 1] = behind;
        loaded[4 * i + 2] = far;
        loaded[4 * i + 3] = b;
    }
    __syncthreads();
    if (on[i]) asm volatile("st.shared.u32 [%0+128], %1;" :: "r"(a), "r"(x[i] ^ 0x5a5a5a5au) : "memory");
    __syncthreads();
    stored[i] = s[t + 64];
}
"""
