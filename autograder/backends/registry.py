"""Choosing and opening backends: the one place that decides (docs/backend-contract.md).

``auto`` is ``gpu`` when PyCUDA imports and creates a context (``gpu.gpu_available``
probes in a short child process, so the grader never holds a CUDA context), else
``emulator``. Every backend opened here runs inside a killable worker subprocess
(``worker.py``). A new backend is a module implementing ``base.Backend`` and a line in
:data:`CLASSES`; the backend modules are imported when first asked for, not at the top (the
emulator's modules import ``base.py``, which runs this package first, and PyCUDA should
load only in a worker).

:class:`Backends` is what the grading pipeline receives: a grading backend, and a safety
backend that sees every access (the same one when the grading backend does).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from autograder.backends.worker import WorkerBackend
from autograder.contract import BACKEND_NAMES, Backend


@dataclass(frozen=True)
class Backends:
    """The grading backend, and the one safety checks run on (``sees_every_access``; may be the same)."""

    grading: Backend
    safety: Backend


# Each backend by name; its module is imported when the backend is first asked for.
CLASSES = {
    "gpu": "autograder.backends.gpu:GpuBackend",
    "emulator": "autograder.backends.emulator:EmulatorBackend",
}


def backend_class(name: str) -> type[Backend]:
    module, _, attribute = CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def make(name: str, **options) -> Backend:
    """Build the backend ``name`` (called inside its worker, so PyCUDA loads only there)."""
    return backend_class(name)(**options)


def resolve(name: str) -> str:
    """``auto`` → ``gpu`` or ``emulator``; other names unchanged (checked)."""
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}")
    if name == "auto":
        from autograder.backends.gpu import gpu_available

        return "gpu" if gpu_available() else "emulator"
    return name


def resolve_where(name: str, gpus_present: bool) -> str:
    """``auto`` → ``gpu`` or ``emulator`` by whether GPUs are present (a cluster's, not this machine's)."""
    if name == "auto":
        return "gpu" if gpus_present else "emulator"
    return resolve(name)


def holds_a_gpu(name: str) -> bool:
    """Whether grading on backend ``name`` (resolved) occupies a GPU."""
    return backend_class(name).capabilities.runs_natively


def select_backend(name: str, compile_s: float = 60, emulator_mb: float | None = None) -> Backend:
    """The backend for ``auto``, ``gpu`` or ``emulator``, in a worker subprocess.

    The emulator's worker has its data capped at ``emulator_mb``; a native backend's is not
    (CUDA maps device memory into the process, and that cap was never tried on a GPU).
    """
    resolved = resolve(name)
    capabilities = backend_class(resolved).capabilities
    memory_mb = int(emulator_mb) if emulator_mb and not capabilities.runs_natively else None
    return WorkerBackend(
        functools.partial(make, resolved), resolved, capabilities, compile_s=compile_s, memory_mb=memory_mb
    )


@contextlib.contextmanager
def open_backends(
    name: str, compile_s: float = 60, emulator_mb: float | None = None, safety_checks: bool = True
) -> Iterator[Backends]:
    """The grading backend ``name`` and a safety backend that sees every access; closed on exit.
    ``safety_checks`` False (``grade --timed-only``, a batch's GPU task): the safety backend's
    worker starts only if something calls it, not beside the grading one while a GPU waits."""
    grading = select_backend(name, compile_s, emulator_mb)
    safety = (
        grading
        if grading.capabilities.sees_every_access
        else select_backend("emulator", compile_s, emulator_mb)
    )
    try:
        started = (grading, safety) if safety_checks else (grading,)
        for backend in {id(b): b for b in started}.values():
            backend.prestart()  # both workers start at once, while the grader reads the submission
        yield Backends(grading=grading, safety=safety)
    finally:
        grading.close()
        safety.close()


def watched_gpu(command: Sequence[str], compile_s: float = 60, stop_s: float = 120) -> Backend:
    """The GPU backend with exact allocations (no canary zones), its worker run under ``command``.

    For compute-sanitizer: a canary zone would put a one-past-the-end access inside an
    allocation, where the sanitizer cannot see it. ``close()`` waits up to ``stop_s`` for the
    watcher to write its report.
    """
    exact = functools.partial(make, "gpu", canary_bytes=0)
    capabilities = backend_class("gpu").capabilities
    return WorkerBackend(exact, "gpu", capabilities, compile_s=compile_s, command=command, stop_s=stop_s)
