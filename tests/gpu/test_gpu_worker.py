"""A kernel that never returns: the worker kills it at the time limit and the next launch runs."""

import time

import numpy as np
import pytest

pytest.importorskip("pycuda.driver")

from autograder.backends.base import LaunchTimeout
from autograder.backends.gpu import GpuBackend, gpu_available
from autograder.backends.worker import WorkerBackend

if not gpu_available():
    pytest.skip("PyCUDA cannot create a CUDA context here", allow_module_level=True)

from gpu_kernels import vector_add, vector_add_error

pytestmark = pytest.mark.gpu


def test_a_hung_kernel_is_killed_at_its_time_limit_and_grading_goes_on():
    rng = np.random.default_rng()
    worker = WorkerBackend(GpuBackend, "gpu")
    try:
        started = time.monotonic()
        with pytest.raises(LaunchTimeout, match="did not finish within 2 s"):
            worker.launch(vector_add("spin_forever", 1000, rng, time_limit_s=2))
        assert time.monotonic() - started < 2 + 30  # the kill, not the kernel, ends the wait
        launch = vector_add("vector_add", 1000, rng)
        assert vector_add_error(launch, worker.launch(launch).outputs) <= 1e-6
        assert worker.starts == 2
    finally:
        worker.close()
