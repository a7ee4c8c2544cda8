"""What a launch needs of its shape alone is worked out once per shape (``machine.launch_frame``):
launches of one kernel at shapes that differ only in their dynamic shared memory, or only in
how many arguments they pass, each read and report what a fresh kernel gives them: the
frame of one shape never serves another, and a launch the driver refuses is refused every
time, after launches that passed."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, LaunchFailure, Scalar
from autograder.emulator.machine import decoded_kernel

from .helpers import launch, out

SIZES = r"""
#define R32(reg) ([] { unsigned v; asm volatile("mov.u32 %0, %%" reg ";" : "=r"(v)); return v; })()
extern "C" __global__ void sizes(unsigned* o) {
    __shared__ float tile[40];
    extern __shared__ float rest[];
    tile[threadIdx.x] = 1.0f;
    rest[threadIdx.x] = 2.0f;
    o[3 * threadIdx.x] = R32("total_smem_size");
    o[3 * threadIdx.x + 1] = R32("aggr_smem_size");
    o[3 * threadIdx.x + 2] = R32("dynamic_smem_size");
}
"""


def _sizes(shared_bytes: int):
    result = launch(SIZES, "sizes", 1, 32, [out("o", 96, np.uint32)], shared_bytes=shared_bytes)
    return result.outputs["o"].tobytes(), [f.message for f in result.findings], result.counters


def test_launches_differing_only_in_dynamic_shared_memory_each_get_their_own():
    sizes = [128, 4096, 64, 4096, 128]  # 64 bytes: the threads past 16 write past `rest`
    decoded_kernel.cache_clear()
    again = [_sizes(n) for n in sizes]
    assert again[0] == again[4] and again[1] == again[3] and len({a[0] for a in again}) == 3
    assert again[2][1] and not again[0][1]
    for n, result in zip(sizes, again, strict=True):
        decoded_kernel.cache_clear()  # a fresh kernel: no frame kept
        assert _sizes(n) == result


def test_a_launch_refused_is_refused_after_launches_that_passed():
    decoded_kernel.cache_clear()
    for _ in range(2):
        launch(SIZES, "sizes", 1, 32, [out("o", 96, np.uint32)], shared_bytes=128)
        with pytest.raises(LaunchFailure, match="takes 1 parameter"):
            launch(SIZES, "sizes", 1, 32, [out("o", 96, np.uint32), out("p", 1)], shared_bytes=128)
        with pytest.raises(LaunchFailure, match="dynamic shared memory"):
            launch(SIZES, "sizes", 1, 32, [out("o", 96, np.uint32)], shared_bytes=240_000)


PARAMS = r"""
extern "C" __global__ void params(char c, double d, int i, const float* in, float* o, short s) {
    o[0] = c; o[1] = (float)d; o[2] = (float)i; o[3] = in[0]; o[4] = s;
}
"""


def _params(k: int) -> list[float]:
    scalars = {"c": (k, "int8"), "d": (0.5 + k, "float64"), "i": (-k, "int32")}
    args = [Scalar(name, value, dtype) for name, (value, dtype) in scalars.items()]
    args += [Buffer("in", np.array([k / 4], np.float32)), out("o", 5), Scalar("s", 3 * k, "int16")]
    return launch(PARAMS, "params", 1, 1, args).outputs["o"].tolist()


def test_launches_of_one_shape_each_read_their_own_arguments():
    decoded_kernel.cache_clear()
    for k in (1, 2, 3):  # one shape: its frame (where each parameter lies) serves them all
        assert _params(k) == [k, 0.5 + k, -k, k / 4, 3 * k]
