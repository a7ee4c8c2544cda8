"""Every test run compiles into a compile cache of its own (``compile_cache``), shared by the
run's workers and the graders its tests start, and removed at its end: a run starts cold, so
the compiles it tests are NVRTC's, never a developer's earlier answers."""

from __future__ import annotations

import os
import shutil
import tempfile

from autograder.backends import compile_cache

_CREATED: list[str] = []


def pytest_configure(config) -> None:
    if os.environ.get(compile_cache.VARIABLE):  # a worker of this run, or a folder the user named
        return
    folder = tempfile.mkdtemp(prefix="autograder-test-compiles-")
    os.environ[compile_cache.VARIABLE] = folder
    _CREATED.append(folder)


def pytest_unconfigure(config) -> None:
    for folder in _CREATED:
        shutil.rmtree(folder, ignore_errors=True)
