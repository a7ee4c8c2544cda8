// Warp-aggregated atomics: each key in [0, buckets) takes the next free slot of its bucket.
// The live lanes of a warp are split by key with cg::labeled_partition (match.any underneath);
// each group's leader adds the group's size to its bucket's counter with one atomic, and the
// group's lanes take consecutive slots after the old count. A ragged last warp has exited
// lanes, which take no part.
// Planted bug: every lane of a group adds the group's size, not only its leader, so the
// counters come out too large.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

__global__ void bucket_slots(const int* keys, int* counts, int* slots, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int key = keys[i];
    cg::coalesced_group same = cg::labeled_partition(cg::coalesced_threads(), key);
    int first = 0;
#ifdef PLANTED_BUG
    first = atomicAdd(&counts[key], (int)same.size());
#else
    if (same.thread_rank() == 0) first = atomicAdd(&counts[key], (int)same.size());
#endif
    slots[i] = same.shfl(first, 0) + same.thread_rank();
}
