// The value of a __shared__ word no thread wrote: whatever the GPU left there; the
// emulator's garbage, and a finding (a read of uninitialised shared memory).
// values: word
// finding: uninitialized_shared_read
extern "C" __global__ void watched(unsigned long long* v, const float* a, const float* b) {
    __shared__ unsigned s[64];
    volatile unsigned* word = s + 5;  // volatile: the compiler must read it
    if (blockIdx.x == 0 && threadIdx.x == 0) v[0] = *word;
}
