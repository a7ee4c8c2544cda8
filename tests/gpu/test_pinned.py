"""Large host arrays page-locked for the length of a call (``backends/pinned.py``), on a GPU."""

import numpy as np
import pytest
from gpu_kernels import vector_add, vector_add_error

from autograder.backends.gpu import GpuBackend
from autograder.backends.pinned import large_arrays, lock_pages, page_ranges, unlock_pages
from autograder.backends.worker import WorkerBackend

pytestmark = pytest.mark.gpu

N = 8 << 20  # 32 MiB an array: locked


def test_a_calls_large_arrays_are_locked_while_it_runs_and_unlocked_after():
    backend = GpuBackend()
    launch = vector_add("vector_add", N, np.random.default_rng())
    arrays = large_arrays(launch)
    try:
        with backend.prepared(launch):
            with backend.active():
                assert lock_pages(arrays) == []  # the driver refuses a range locked already
            result = backend.launch(launch)
        with backend.active():
            again = lock_pages(arrays)
            unlock_pages(again)
    finally:
        backend.close()
    assert len(arrays) == 3 and len(again) == len(page_ranges(arrays)) == 3  # all unlocked after
    assert vector_add_error(launch, result.outputs) <= 1e-6


def test_a_large_launch_through_a_gpu_worker_reads_its_shared_arrays_locked():
    """The worker locks a message's shared-memory arrays before it says it is ready, copies them
    while it holds the GPU, and answers the launch bit for bit."""
    worker = WorkerBackend(GpuBackend, "gpu", GpuBackend.capabilities)
    try:
        for _ in range(2):  # the second reuses the worker: nothing was left locked
            launch = vector_add("vector_add", N, np.random.default_rng())
            assert vector_add_error(launch, worker.launch(launch).outputs) <= 1e-6
    finally:
        worker.close()
