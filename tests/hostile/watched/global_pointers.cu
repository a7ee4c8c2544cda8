// Where the buffers lie: cudaMalloc's addresses, 256-byte aligned at least, in the 0x7f..
// range of the 47-bit address space, a buffer's bytes apart from another's.
// values: a b g
// holds: a % 256 == 0 and b % 256 == 0
// holds: a >> 40 == 0x7F and b >> 40 == 0x7F
// holds: a % (1 << 40) != 0 and b % (1 << 40) != 0
// holds: 4000 <= abs(signed(b - a)) < (1 << 40)
// holds: g >> 40 == 0x7F
__device__ int g;

extern "C" __global__ void watched(unsigned long long* v, const float* a, const float* b) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        v[0] = (unsigned long long)a;
        v[1] = (unsigned long long)b;
        v[2] = (unsigned long long)&g;
    }
}
