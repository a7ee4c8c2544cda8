"""``--sanitize`` on a real GPU: compute-sanitizer's reports become findings with lines."""

import numpy as np
import pytest
from gpu_kernels import vector_add

from autograder.contract import Buffer, Launch, Program, Scalar
from autograder.grading import sanitize

pytestmark = pytest.mark.gpu

if sanitize.sanitizer_path() is None:
    pytest.skip("compute-sanitizer is not installed here", allow_module_level=True)

# window_sum staged through shared memory with its barrier missing: a read-after-write race.
UNSYNCED_WINDOW = """
__global__ void window_sum(const float* x, float* y, int n) {
    __shared__ float tile[256 + 4];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + 4) tile[threadIdx.x] = x[i];
    if (threadIdx.x < 4 && i + 256 < n + 4) tile[threadIdx.x + 256] = x[i + 256];
    if (i < n) y[i] = tile[threadIdx.x] + tile[threadIdx.x + 1] + tile[threadIdx.x + 2]
                      + tile[threadIdx.x + 3] + tile[threadIdx.x + 4];
}
"""


def test_memcheck_names_the_line_and_thread_of_a_missing_guard():
    launch = vector_add("vector_add_unguarded", 1000, np.random.default_rng())
    [run] = sanitize.cross_check([launch], tools=("memcheck",), time_limit_s=120)
    assert run.note is None and run.errors
    # On the H200 (2026-11-29) memcheck reported the unguarded loads of a[i] and b[i] and not
    # the store after them: the faulting threads do not get that far.
    read = next(f for f in run.findings if f.kind == "out_of_bounds_read")
    assert read.line == 4 and read.block == (3, 0, 0) and read.thread[0] >= 232


def test_memcheck_is_clean_on_the_guarded_kernel():
    launch = vector_add("vector_add", 1000, np.random.default_rng())
    [run] = sanitize.cross_check([launch], tools=("memcheck",), time_limit_s=120)
    assert run.note is None and run.findings == () and run.errors == 0


def test_racecheck_reports_the_missing_barrier():
    n = 1000
    rng = np.random.default_rng()
    launch = Launch(
        Program(UNSYNCED_WINDOW, "window_sum.cu", "window_sum"),
        grid=(-(-n // 256), 1, 1),
        block=(256, 1, 1),
        args=(
            Buffer("x", rng.uniform(0.5, 1.5, n + 4).astype(np.float32)),
            Buffer("y", np.full(n, np.nan, np.float32), is_output=True),
            Scalar("n", n),
        ),
    )
    [run] = sanitize.cross_check([launch], tools=("racecheck",), time_limit_s=120)
    assert run.note is None
    assert [f.kind for f in run.findings] and all(f.kind == "shared_race" for f in run.findings)
    assert {f.line for f in run.findings} & {5, 6}
