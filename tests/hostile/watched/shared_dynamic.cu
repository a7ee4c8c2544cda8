// Static shared memory from offset 1024, dynamic shared memory after it at the alignment
// the H200 gives it (16 bytes: NVRTC declares every extern __shared__ array .align 16).
// values: first dynamic
// holds: first == 1024
// holds: dynamic % 16 == 0 and dynamic >= first + 1000
extern "C" __global__ void watched(unsigned long long* v, const float* a, const float* b) {
    __shared__ char s[1000];
    extern __shared__ float dyn[];
    s[threadIdx.x] = (char)threadIdx.x;
    dyn[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        v[0] = __cvta_generic_to_shared(s);
        v[1] = __cvta_generic_to_shared(dyn);
    }
}
