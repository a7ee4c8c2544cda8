// __isShared / __isGlobal (isspacep) on pointers the compiler cannot see through.
// values: shared_shared shared_global global_shared global_global
// holds: shared_shared == 1 and shared_global == 0
// holds: global_shared == 0 and global_global == 1
extern "C" __global__ void watched(unsigned long long* v, const float* a, const float* b) {
    __shared__ float s[64];
    s[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    const float* p = (threadIdx.x & 1) ? a : s;
    if (blockIdx.x == 0 && threadIdx.x < 2) {
        v[2 * threadIdx.x] = __isShared(p);
        v[2 * threadIdx.x + 1] = __isGlobal(p);
    }
}
