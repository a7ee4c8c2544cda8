"""How an H200 counts the wavefronts of a 16-byte shared load (``ld.shared.v4``): one warp
loads one float4 per lane from a 256-float4 tile at indices given per pattern; run under
``ncu`` (bench/device/bank_phases.sh), each launch's ``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum``
is what the GPU counts. Prints the patterns in launch order, with the wavefronts a whole-warp
count and a count in four phases of 8 lanes give, for docs/known-gaps.md.
"""

import cupy as cp
import numpy as np

SOURCE = r"""
extern "C" __global__ void v4(const int* idx, float4* out) {
    __shared__ float4 tile[256];
    int t = threadIdx.x;
    for (int k = t; k < 256; k += 32) tile[k] = make_float4(k, k, k, k);
    __syncwarp();
    out[t] = tile[idx[t]];
}
"""


def wavefronts(indices, phase: int) -> int:
    """Max distinct 4-byte words per bank, summed over groups of ``phase`` lanes."""
    total = 0
    for start in range(0, 32, phase):
        words = {4 * int(i) + w for i in indices[start : start + phase] for w in range(4)}
        banks = [0] * 32
        for word in words:
            banks[word % 32] += 1
        total += max(banks)
    return total


PATTERNS = {
    "contiguous": np.arange(32),
    "stride 2 (32 bytes)": np.arange(32) * 2,
    "stride 8 (128 bytes)": np.arange(32) * 8,
    "broadcast": np.zeros(32, int),
    "first 8 lanes stride 2, rest contiguous": np.r_[np.arange(8) * 2, 16 + np.arange(24)],
    "pairs of lanes 8 apart share banks": np.r_[
        np.arange(8), np.arange(8) + 8, np.arange(8) + 64, np.arange(8) + 72
    ],
    "each phase one bank group": np.repeat(np.arange(4) * 8, 8) + np.tile(np.arange(8) * 32, 4) % 256,
    "lane i at 8*(i % 4) + i // 4": 8 * (np.arange(32) % 4) + np.arange(32) // 4,
    "quarter q all at index q": np.repeat(np.arange(4), 8),
    "quarter q all at index 8q": np.repeat(np.arange(4) * 8, 8),
    "half h all at index h": np.repeat(np.arange(2), 16),
    "half h all at index 8h": np.repeat(np.arange(2) * 8, 16),
    "quarters 0,2 at index 0; 1,3 at index 1": np.tile(np.repeat(np.arange(2), 8), 2),
    "quarter q: lanes at q and q+4": np.repeat(np.arange(4), 8) + 4 * np.tile(np.arange(8) % 2, 4),
    "quarters 0,1 contiguous 0..15; 2,3 at index 0": np.r_[np.arange(16), np.zeros(16, int)],
    "quarter 0 contiguous, 1-3 at index 0": np.r_[np.arange(8), np.zeros(24, int)],
    "stride 2 in half 0, half 1 at index 0": np.r_[np.arange(16) * 2, np.zeros(16, int)],
    "quarters of 6 and 1 chunks (112 bytes a half)": np.tile(np.r_[np.arange(8) % 6, np.full(8, 6)], 2)
    + np.repeat([0, 8], 16),
    "quarters of 4 and 4 chunks (128 bytes a half)": np.tile(np.r_[np.arange(8) % 4, 4 + np.arange(8) % 4], 2)
    + np.repeat([0, 8], 16),
    "quarters of 5 and 1 chunks (96 bytes a half)": np.tile(np.r_[np.arange(8) % 5, np.full(8, 5)], 2)
    + np.repeat([0, 8], 16),
    "quarters of 3 and 3 chunks (96 bytes a half)": np.tile(np.r_[np.arange(8) % 3, 3 + np.arange(8) % 3], 2)
    + np.repeat([0, 8], 16),
    "quarters of 8 and 1 chunks, halves in other banks": np.tile(np.r_[np.arange(8), np.full(8, 8)], 2)
    + np.repeat([0, 16], 16),
    "quarters of 3 and 1 chunks (4 a half)": np.tile(np.r_[np.arange(8) % 3, np.full(8, 3)], 2)
    + np.repeat([0, 8], 16),
    "quarters of 2 chunks in one bank group each": np.concatenate([np.tile([q, q + 8], 4) for q in range(4)]),
    "quarter 0 of 2 chunks, the others of 1": np.r_[np.tile([0, 1], 4), np.repeat([2, 3, 4], 8)],
    "half 0 quarters of 1 chunk, half 1 quarters of 3": np.r_[
        np.repeat([0, 1], 8), np.arange(8) % 3 + 8, np.arange(8) % 3 + 11
    ],
}

if __name__ == "__main__":
    kernel = cp.RawKernel(SOURCE, "v4")
    out = cp.zeros((32, 4), cp.float32)
    for name, pattern in PATTERNS.items():
        idx = cp.asarray(pattern.astype(np.int32) % 256)
        kernel((1,), (32,), (idx, out))
        cp.cuda.Device().synchronize()
        got = out.get()[:, 0].astype(int)
        assert (got == pattern % 256).all(), name
        p = pattern % 256
        print(
            f"{name}: whole warp {wavefronts(p, 32)}, halves {wavefronts(p, 16)}, quarters {wavefronts(p, 8)}"
        )
