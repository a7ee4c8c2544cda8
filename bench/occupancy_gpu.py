"""Registers and occupancy as ``autograder profile`` computes them without a GPU, against the
GPU's own driver (``cuFuncGetAttribute``, ``cuOccupancyMaxActiveBlocksPerMultiprocessor``).

For every reference kernel at its spec's launch geometry (the first case of each group) and
for a synthetic kernel built to need given registers and shared memory over block sizes from
32 to 1024 threads, compiles the cubin for this GPU with NVRTC, loads it with the driver API
(``cuda-bindings``), and compares: registers per thread and static shared memory (ptxas's
report against the loaded function's attributes), blocks per SM (``backends/occupancy.py``
against the driver). Also prints the device's own per-SM limits beside ``occupancy.DEVICES``'.
Results: ``bench/results/occupancy.md``; run on the device by ``bench/device/occupancy.sh``.

Usage: python3 bench/occupancy_gpu.py
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda.bindings import driver  # noqa: E402

from autograder.backends.compiler import compile_cubin  # noqa: E402
from autograder.contract import Program  # noqa: E402
from autograder.course.cases import GroupCase, prepare  # noqa: E402
from autograder.course.spec import load_specs  # noqa: E402
from autograder.device import DEVICES  # noqa: E402
from autograder.grading.resources import kernel_resources  # noqa: E402

A = driver.CUdevice_attribute
F = driver.CUfunction_attribute
SYNTHETIC = r"""
// REGS live accumulators (a register budget set by __launch_bounds__ below), SHARED floats of
// static shared memory, THREADS threads a block
extern "C" __global__ void __launch_bounds__(THREADS) synthetic(const float* x, float* y, int n) {
    __shared__ float tile[SHARED];
    float acc[REGS];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < REGS; ++k) acc[k] = x[(i + 31 * k) % n];
    tile[threadIdx.x % SHARED] = acc[0];
    __syncthreads();
    float s = tile[(threadIdx.x + 1) % SHARED];
    #pragma unroll
    for (int k = 0; k < REGS; ++k) s = s * acc[k] + acc[(k + 1) % REGS];
    y[i] = s;
}
"""


def check(result) -> object:
    """The value of a driver call, or a RuntimeError naming its error."""
    error, *values = result
    if error != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error {error}")
    return values[0] if len(values) == 1 else values


def device_limits(device) -> dict[str, int]:
    def attribute(name):
        return check(driver.cuDeviceGetAttribute(getattr(A, name), device))

    return {
        "sms": attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        "threads_per_sm": attribute("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
        "blocks_per_sm": attribute("CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR"),
        "shared_per_sm": attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        "shared_per_block": attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        "reserved_shared": attribute("CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK"),
        "registers_per_sm": attribute("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
    }


def measured(program: Program, arch: str, threads: int, dynamic: int) -> dict[str, int]:
    """The loaded function's registers and static shared memory, and the driver's blocks per SM."""
    compiled = compile_cubin(program, arch)
    module = check(driver.cuModuleLoadData(compiled.cubin))
    try:
        function = check(driver.cuModuleGetFunction(module, compiled.lowered_name.encode()))
        if dynamic:
            attribute = F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check((driver.cuFuncSetAttribute(function, attribute, dynamic)[0], None))
        return {
            "registers": check(driver.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_NUM_REGS, function)),
            "static_shared": check(
                driver.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function)
            ),
            "blocks_per_sm": check(
                driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, dynamic)
            ),
        }
    finally:
        driver.cuModuleUnload(module)


def launches(specs):
    """(label, program, threads, dynamic shared bytes) of every reference's first case of each
    group, then of the synthetic kernel over registers, shared memory and block sizes."""
    for name, spec in sorted(specs.items()):
        source = (ROOT / f"reference/{name}.cu").read_text()
        for group, cases in spec.cases.items():
            if cases and group != "perf":
                launch = prepare(spec, source, GroupCase(group, 0, cases[0], 1), 60).launch
                label = f"{name} {group} {dict(cases[0])}"
                yield label, launch.program, math.prod(launch.block), launch.shared_bytes
    for regs, shared, threads in itertools.product(
        (8, 24, 40, 64), (32, 2048, 12288), (32, 96, 128, 256, 512, 1024)
    ):
        defines = (("REGS", str(regs)), ("SHARED", str(shared)), ("THREADS", str(threads)))
        program = Program(SYNTHETIC, "synthetic.cu", "synthetic", defines)
        yield f"synthetic REGS={regs} SHARED={shared}", program, threads, 0


def main() -> None:
    check((driver.cuInit(0)[0], None))
    device = check(driver.cuDeviceGet(0))
    major = check(driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
    minor = check(driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
    arch = f"sm_{major}{minor}"
    context = check(driver.cuDevicePrimaryCtxRetain(device))
    check((driver.cuCtxSetCurrent(context)[0], None))
    name = check(driver.cuDeviceGetName(64, device)).split(b"\0")[0].decode()
    ours = DEVICES[arch]
    print(f"{name} ({arch})\n\n| limit | the device | occupancy.DEVICES |\n|---|---|---|")
    for key, value in device_limits(device).items():
        print(f"| {key} | {value:,} | {getattr(ours, key):,} |")
    print(
        "\n| launch | threads | dynamic shared | registers (ptxas / driver) | static shared "
        "| blocks per SM (ours / driver) |"
    )
    print("|---|---|---|---|---|---|")
    rows = equal = 0
    for label, program, threads, dynamic in launches(load_specs(ROOT)):
        found = kernel_resources(program, arch)
        theirs = measured(program, arch, threads, dynamic)
        blocks = found.occupancy(threads, dynamic).blocks_per_sm
        same = (found.registers, found.static_shared, blocks) == (
            theirs["registers"],
            theirs["static_shared"],
            theirs["blocks_per_sm"],
        )
        rows, equal = rows + 1, equal + same
        print(
            f"| {label} | {threads} | {dynamic:,} | {found.registers} / {theirs['registers']} | "
            f"{found.static_shared:,} / {theirs['static_shared']:,} | {blocks} / {theirs['blocks_per_sm']}"
            f"{'' if same else ' DIFFERENT'} |"
        )
    print(f"\n{equal} of {rows} launches equal in registers, static shared memory and blocks per SM")


if __name__ == "__main__":
    main()
