"""Choosing a backend: the one place that decides (docs/backend-contract.md).

``auto`` is ``gpu`` when PyCUDA imports and creates a context (``gpu.gpu_available``
probes in a short child process, so the grader never holds a CUDA context), else
``emulator``. Every backend returned here runs inside a killable worker subprocess
(``worker.py``).
"""

from __future__ import annotations

from autograder.backends.base import Backend
from autograder.backends.worker import WorkerBackend

NAMES = ("auto", "gpu", "emulator")


def resolve(name: str) -> str:
    """``auto`` → ``gpu`` or ``emulator``; other names unchanged (checked)."""
    if name not in NAMES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)}")
    if name == "auto":
        from autograder.backends.gpu import gpu_available  # gpu.py needs the compiler, which needs base.py

        return "gpu" if gpu_available() else "emulator"
    return name


def make_gpu() -> Backend:
    """Build the GPU backend (called inside the worker, so PyCUDA loads only there)."""
    from autograder.backends.gpu import GpuBackend

    return GpuBackend()


def make_emulator() -> Backend:
    from autograder.backends.emulator import EmulatorBackend

    return EmulatorBackend()


FACTORIES = {"gpu": make_gpu, "emulator": make_emulator}


def select_backend(name: str, compile_s: float = 60, emulator_mb: float | None = None) -> Backend:
    """The backend for ``auto``, ``gpu`` or ``emulator``, in a worker subprocess.

    The emulator's worker has its data capped at ``emulator_mb``; the GPU's is not (CUDA maps
    device memory into the process, and that cap was never tried on a GPU).
    """
    resolved = resolve(name)
    memory_mb = int(emulator_mb) if emulator_mb and resolved == "emulator" else None
    return WorkerBackend(FACTORIES[resolved], resolved, compile_s=compile_s, memory_mb=memory_mb)
