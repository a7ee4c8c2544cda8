"""Large host arrays page-locked for the length of a call (``backends/pinned.py``), on a GPU."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_kernels import vector_add, vector_add_error

from autograder.backends.gpu import GpuBackend
from autograder.backends.pinned import empty_in_own_pages, large_arrays, lock_pages, page_ranges, unlock_pages
from autograder.backends.worker import WorkerBackend
from autograder.contract import Buffer

pytestmark = pytest.mark.gpu

N = 8 << 20  # 32 MiB an array: locked
ROOT = Path(__file__).resolve().parents[2]


def _in_own_pages(launch):
    """The launch with each buffer copied into pages of its own, as a worker receives it."""

    def moved(arg):
        if not isinstance(arg, Buffer):
            return arg
        data = empty_in_own_pages(arg.data.shape, arg.data.dtype)
        data[...] = arg.data
        return dataclasses.replace(arg, data=data)

    return dataclasses.replace(launch, args=tuple(moved(a) for a in launch.args))


def test_a_calls_large_arrays_are_locked_while_it_runs_and_unlocked_after():
    backend = GpuBackend()
    launch = _in_own_pages(vector_add("vector_add", N, np.random.default_rng()))
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
    assert len(arrays) == 3  # all unlocked after: every range locks again (adjacent mappings merge)
    assert again and len(again) == len(page_ranges(arrays))
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


def test_a_grading_of_several_assignments_scores_every_reference_in_full(tmp_path):
    """On 2026-12-03 the H200 refused the first launch of matmul_register_tile after these three
    assignments' timings ("cuMemcpyDtoH failed: invalid argument"): the worker had page-locked the
    whole pages of an output it had made on numpy's heap, and a later array straddled them. The
    reference lost its performance points, blamed on the kernel."""
    command = [sys.executable, "-m", "autograder", "grade", str(ROOT / "reference"), "--backend", "gpu"]
    command += [
        "--timed-only",
        "--results",
        str(tmp_path / "results.json"),
        "--report",
        str(tmp_path / "report"),
    ]
    for name in ("vector_add", "window_sum", "matmul_naive", "matmul_register_tile"):
        command += ["--assignment", name]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert "12 / 12 points graded here" in result.stdout, result.stdout
