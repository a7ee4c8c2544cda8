// The clocks: %clock64 counts an SM's cycles since the GPU started (seconds of them at
// least) and advances over a loop; %globaltimer is nanoseconds since 1970 in steps of 32.
// values: c0 c1 t0 t1 sum
// holds: c0 > 1 << 32
// holds: c0 < c1 < c0 + 10**7
// holds: t0 % 32 == 0 and 1.6e18 < t0 <= t1
extern "C" __global__ void watched(unsigned long long* v, const float* a, const float* b) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long t0, t1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        long long c0 = clock64();
        float sum = 0.0f;
        for (int k = 0; k < 100; ++k) sum = sum * a[k] + b[k];
        long long c1 = clock64();
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        v[0] = c0;
        v[1] = c1;
        v[2] = t0;
        v[3] = t1;
        v[4] = (unsigned long long)sum;
    }
}
