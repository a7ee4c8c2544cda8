"""Crashes and hangs, each in a worker process: the item fails, the next launch runs in a fresh one.

A crashed kernel spoils CUDA for its whole process, so these never run in the pytest process.
"""

import time

import numpy as np
import pytest
from gpu_kernels import vector_add, vector_add_error

from autograder.backends.gpu import GpuBackend
from autograder.backends.worker import WorkerBackend
from autograder.contract import LaunchFailure, LaunchTimeout

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def worker():
    backend = WorkerBackend(GpuBackend, "gpu")
    yield backend
    backend.close()


def assert_vector_add_runs(worker, rng):
    launch = vector_add("vector_add", 1000, rng)
    assert vector_add_error(launch, worker.launch(launch).outputs) <= 1e-6


@pytest.mark.parametrize(
    ("stem", "reason"),
    [
        ("wild_pointer", "illegal memory access"),
        ("misaligned", "misaligned address"),
        ("trap", "launch failure|illegal instruction"),
    ],
)
def test_a_crash_fails_its_launch_and_the_next_runs_in_a_fresh_worker(worker, stem, reason):
    rng = np.random.default_rng()
    assert_vector_add_runs(worker, rng)
    starts = worker.starts
    with pytest.raises(LaunchFailure, match=reason) as failure:
        worker.launch(vector_add(stem, 1000, rng))
    assert str(failure.value).startswith(f"{stem}.cu: the kernel crashed on the GPU")
    assert_vector_add_runs(worker, rng)
    assert worker.starts == starts + 1


def test_a_hung_kernel_is_killed_at_its_time_limit_and_grading_goes_on(worker):
    rng = np.random.default_rng()
    assert_vector_add_runs(worker, rng)
    starts = worker.starts
    started = time.monotonic()
    with pytest.raises(LaunchTimeout, match="did not finish within 2 s"):
        worker.launch(vector_add("spin_forever", 1000, rng, time_limit_s=2))
    assert time.monotonic() - started < 10  # the kill, not the kernel, ends the wait
    assert_vector_add_runs(worker, rng)
    assert worker.starts == starts + 1
