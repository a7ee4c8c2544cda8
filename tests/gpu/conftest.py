"""Every test in this folder needs PyCUDA and a CUDA GPU; where either is missing, each one
is skipped (CI has neither). Crashing kernels run through the worker, never in pytest."""

import pytest

from autograder.backends.gpu import gpu_available


def pytest_runtest_setup(item):
    if not gpu_available():
        pytest.skip("needs PyCUDA and a GPU it can create a context on")
