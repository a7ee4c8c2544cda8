// Where the first __shared__ variable lies in the shared window: offset 1024, the H200
// keeping the 1 KiB below it for the system; and the window's generic base.
// values: offset generic
// holds: offset == 1024
// holds: (generic - offset) % (1 << 24) == 0
extern "C" __global__ void watched(unsigned long long* v, const float* a, const float* b) {
    __shared__ float s[64];
    s[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        v[0] = __cvta_generic_to_shared(s);
        v[1] = (unsigned long long)s;
    }
}
