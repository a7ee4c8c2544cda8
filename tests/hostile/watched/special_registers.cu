// The SM count and slots, which SM and warp slot a block runs on, the shared sizes.
// values: nsmid nwarpid dynamic total aggr warpid sm0 sm1 sm2 sm3
// holds: nsmid == 132 and nwarpid == 64
// holds: max(sm0, sm1, sm2, sm3) < nsmid and len({sm0, sm1, sm2, sm3}) > 1
// holds: warpid < nwarpid
// holds: dynamic == 3000 and total % 128 == 0 and total >= dynamic and aggr >= dynamic + 1024
__device__ unsigned sreg(int which) {
    unsigned r;
    if (which == 0) asm volatile("mov.u32 %0, %%nsmid;" : "=r"(r));
    else if (which == 1) asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(r));
    else if (which == 2) asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    else if (which == 3) asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(r));
    else if (which == 4) asm volatile("mov.u32 %0, %%aggr_smem_size;" : "=r"(r));
    else if (which == 5) asm volatile("mov.u32 %0, %%warpid;" : "=r"(r));
    else asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

extern "C" __global__ void watched(unsigned long long* v, const float* a, const float* b) {
    if (threadIdx.x == 0) {
        if (blockIdx.x == 0)
            for (int k = 0; k < 6; ++k) v[k] = sreg(k);
        v[6 + blockIdx.x] = sreg(6);
    }
}
