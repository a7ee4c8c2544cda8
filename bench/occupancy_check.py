"""``autograder/device.py`` against CUDA's own occupancy calculator.

CUDA ships its calculator as a header, ``cuda_occupancy.h`` (in the ``nvidia-cuda-runtime``
wheel's include folder, beside the headers NVRTC compiles with). This script writes a small
C++ program that includes it, fills its device properties with each of ``occupancy.DEVICES``'
figures, asks ``cudaOccMaxActiveBlocksPerMultiprocessor`` for a grid of configurations (block
size, registers per thread, static and dynamic shared memory, barriers) and compares each
answer, and each per-resource limit, with ours. Needs a C++ compiler (``g++``), no GPU.
Results: ``bench/results/occupancy.md``.

Usage: python3 bench/occupancy_check.py [--cxx g++]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.backends.compiler import cuda_include_dirs  # noqa: E402
from autograder.device import DEVICES, occupancy  # noqa: E402

THREADS = (32, 64, 96, 128, 200, 256, 384, 512, 768, 1024)
REGISTERS = (16, 24, 32, 40, 48, 64, 72, 96, 128, 168, 255)
SHARED = (
    (0, 0),
    (1024, 0),
    (4096, 0),
    (12288, 0),
    (0, 16384),
    (8192, 40000),
    (48 << 10, 0),
    (0, 100_000),
    (0, 232_448),
)
BARRIERS = (1, 2, 4)
LIMITS = {"warps": "blockLimitWarps", "blocks": "blockLimitBlocks", "shared memory": "blockLimitSharedMem",
          "registers": "blockLimitRegs", "barriers": "blockLimitBarriers"}  # fmt: skip

HARNESS = r"""
#include <cstdio>
#include <cuda_occupancy.h>
int main() {
    int configs[][11] = {
%s
    };
    for (auto& c : configs) {
        cudaOccDeviceProp p;
        p.computeMajor = c[0] / 10; p.computeMinor = c[0] %% 10;
        p.maxThreadsPerBlock = 1024; p.maxThreadsPerMultiprocessor = c[1];
        p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536; p.warpSize = 32;
        p.sharedMemPerBlock = 48 * 1024; p.sharedMemPerMultiprocessor = c[2];
        p.numSms = 1; p.sharedMemPerBlockOptin = c[3]; p.reservedSharedMemPerBlock = 1024;
        cudaOccFuncAttributes a;
        a.maxThreadsPerBlock = 1024; a.numRegs = c[5]; a.sharedSizeBytes = c[6];
        a.partitionedGCConfig = PARTITIONED_GC_OFF; a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        a.maxDynamicSharedSizeBytes = c[3]; a.numBlockBarriers = c[8];
        cudaOccDeviceState s;
        cudaOccResult r;
        int err = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, c[4], c[7]);
        printf("%%d %%d %%d %%d %%d %%d %%d\n", err, r.activeBlocksPerMultiprocessor, r.blockLimitWarps,
               r.blockLimitBlocks, r.blockLimitSharedMem, r.blockLimitRegs, r.blockLimitBarriers);
    }
}
"""


def configurations():
    for arch, device in DEVICES.items():
        for threads, regs, (static, dynamic), bars in itertools.product(THREADS, REGISTERS, SHARED, BARRIERS):
            if static + dynamic <= device.shared_per_block:
                yield arch, device, threads, regs, static, dynamic, bars


def calculator(configs: list, cxx: str) -> list[list[int]]:
    """cuda_occupancy.h's answer for each configuration: error, blocks, then each limit."""
    rows = [
        "{"
        + ", ".join(str(v) for v in (arch[3:], d.threads_per_sm, d.shared_per_sm, d.shared_per_block))
        + ", "
        + ", ".join(str(v) for v in (t, r, s, y, b))
        + "},"
        for arch, d, t, r, s, y, b in configs
    ]
    with tempfile.TemporaryDirectory() as scratch:
        source, program = Path(scratch, "occ.cpp"), Path(scratch, "occ")
        source.write_text(HARNESS % "\n".join(rows))
        includes = [f"-I{d}" for d in cuda_include_dirs()]
        subprocess.run([cxx, "-std=c++17", "-O1", *includes, str(source), "-o", str(program)], check=True)
        out = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    return [[int(x) for x in line.split()] for line in out.splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cxx", default="g++")
    args = parser.parse_args()
    configs = list(configurations())
    answers = calculator(configs, args.cxx)
    print("| arch | configurations | blocks per SM equal | every limit equal | mismatches |")
    print("|---|---|---|---|---|")
    for arch in DEVICES:
        mine = [(c, a) for c, a in zip(configs, answers, strict=True) if c[0] == arch]
        equal_blocks = equal_limits = 0
        wrong = []
        for (_, device, threads, regs, static, dynamic, bars), (err, blocks, *limits) in mine:
            ours = occupancy(device, threads, static, dynamic, regs, bars)
            theirs = dict(zip(LIMITS, limits, strict=True))
            same_limits = all(theirs[k] == v for k, v in ours.limits.items())
            equal_blocks += err == 0 and ours.blocks_per_sm == blocks
            equal_limits += err == 0 and same_limits
            if err or ours.blocks_per_sm != blocks or not same_limits:
                wrong.append(f"{threads}t {regs}r {static}+{dynamic}B {bars}bar: {ours.limits} vs {theirs}")
        print(f"| {arch} | {len(mine)} | {equal_blocks} | {equal_limits} | {'; '.join(wrong[:3])} |")


if __name__ == "__main__":
    main()
