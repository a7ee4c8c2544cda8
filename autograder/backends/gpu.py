"""The ``gpu`` backend: NVRTC cubins launched through PyCUDA, every buffer between two canaries.

One compile serves both backends (``autograder/backends/compiler.py``): NVRTC builds a cubin for
the device's own architecture, read from the device, and PyCUDA loads it with
``module_from_buffer`` (the driver refuses the PTX of a newer NVRTC, see
``docs/backend-contract.md``). Modules are cached by :class:`Program`.

Each buffer is copied into one allocation that starts and ends with ``CANARY_BYTES`` of
``CANARY_BYTE``; after the launch the zones are read back, and any changed byte becomes an
``out_of_bounds_write`` finding naming the array and the element indices. The canary byte is
the contract's ``UNDEFINED_BYTE``, what the emulator reads outside an allocation, so a read
just past an array computes the same on both backends.

What this backend cannot see (the emulator can): reads out of bounds, writes that land
farther than ``CANARY_BYTES`` from an array, which thread or source line wrote, barrier and
race bugs.

A crash (illegal or misaligned address, trap) raises :class:`LaunchFailure` and spoils CUDA
for the whole process: on an H200 (driver 580) even a new context fails with the same
error. A kernel that never returns cannot be stopped from inside the process: past
``time_limit_s`` the launch raises :class:`LaunchTimeout`, and the kernel keeps the GPU
until the process ends. After either, every call raises :class:`LaunchFailure`: the
grader runs this backend in ``worker.py``'s subprocess, which it replaces after such a
failure. A launch the driver refuses (too many threads, too much shared memory) leaves the
context intact.

PyCUDA is imported lazily, so importing this module needs no GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import numpy as np

from autograder.backends.compiler import compile_cubin
from autograder.backends.gpu_timing import time_case
from autograder.backends.pinned import large_arrays, lock_pages, unlock_pages
from autograder.contract import (
    UNDEFINED_BYTE,
    Backend,
    Buffer,
    Capabilities,
    CompileError,
    Finding,
    Launch,
    LaunchFailure,
    LaunchResult,
    LaunchTimeout,
    Program,
    Timing,
    TimingRequest,
    Unsupported,
)
from autograder.errors import AutograderError
from autograder.feedback import counted

CANARY_BYTES = 64 * 1024  # each side of every buffer; a multiple of 256 keeps the data aligned
# The emulator's undefined byte: a read just past an array gives the same bits on both backends
# (it was 0xCB, a finite -2.67e7 that a kernel multiplying it by 0 turned into a right answer on
# the H200 while the emulator's NaN made it wrong: bench/results/verdicts-gpu.md).
CANARY_BYTE = UNDEFINED_BYTE
DEFAULT_SHARED_LIMIT = 48 * 1024  # more dynamic shared memory needs an opt-in attribute
COPYING = "a copy between the host and the GPU"  # the grader's, not the kernel's
PRINTF_LIMIT = 64 * 1024  # characters of device printf output kept per launch

_STRANDED: list = []  # a spoiled context's objects: freeing them fails or waits on a hung kernel

_PROBE = "import pycuda.driver as d; d.init(); c = d.Device(0).make_context(); c.pop(); c.detach()"


@functools.cache
def gpu_available() -> bool:
    """True when PyCUDA imports and a CUDA context can be created.

    The probe runs in a subprocess so that the calling process never initialises CUDA
    (a forked child of a CUDA process cannot use the GPU).
    """
    if importlib.util.find_spec("pycuda") is None:
        return False
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _driver():
    import pycuda.driver

    return pycuda.driver


class GpuBackend(Backend):
    """Compiles with NVRTC for this device and launches with PyCUDA, in the calling process.

    Besides the contract, ``gpu_timing.py`` uses ``driver``, ``device``, ``l2_bytes``,
    ``function(program)``, ``active()``, ``check_usable()``, ``cuda_failures(...)`` and
    ``grader_failures(...)`` to time launches in this backend's context with the same compile
    cache and the same crash handling.
    """

    name = "gpu"
    capabilities = Capabilities(measures_time=True, runs_natively=True)

    def __init__(self, device: int = 0, canary_bytes: int = CANARY_BYTES):
        self.canary_bytes = canary_bytes  # 0 under compute-sanitizer, which wants exact allocations
        self.driver = _driver()
        self.driver.init()
        self.device = self.driver.Device(device)
        major, minor = self.device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self.device_name = self.device.name()
        self.l2_bytes = self.device.get_attribute(self.driver.device_attribute.L2_CACHE_SIZE)
        self._context = None
        self._failure: str | None = None  # why CUDA is unusable in this process
        self._functions: dict[Program, tuple] = {}  # Program -> (module, function)
        self._open_context()

    def compile(self, program: Program) -> None:
        self.function(program)

    def launch(self, launch: Launch) -> LaunchResult:
        refuse_cooperative(launch)
        function = self.function(launch.program, launch.shared_bytes)
        buffers = [arg for arg in launch.args if isinstance(arg, Buffer)]
        allocations = {}
        with self.active():
            try:
                with self.grader_failures(COPYING):
                    for b in buffers:
                        allocations[b.name] = to_device(self.driver, b, self.canary_bytes)
                with self.cuda_failures(launch.program, LaunchFailure):
                    elapsed_ms, stdout = self._run(function, launch, allocations)
                with self.grader_failures(COPYING):
                    back = {
                        b.name: from_device(self.driver, b, allocations[b.name], self.canary_bytes)
                        for b in buffers
                    }
            finally:
                self._free(allocations.values())
        return LaunchResult(
            outputs={name: contents for name, (contents, _findings) in back.items()},
            findings=[f for _contents, findings in back.values() for f in findings],
            stdout=stdout,
            elapsed_ms=elapsed_ms,
        )

    def time(self, request: TimingRequest) -> Timing:
        """Time a kernel against the reference, interleaved (``gpu_timing.py``)."""
        for launch in request.student:
            refuse_cooperative(launch)
        return time_case(self, request)

    @contextlib.contextmanager
    def prepared(self, argument: Launch | TimingRequest) -> Iterator[None]:
        """The call's large arrays page-locked where they lie (``pinned.py``), so that its copies,
        made while it holds the GPU, run at the copy engine's rate; unlocked after the call, unless
        the call spoiled CUDA (the process then goes, and its locks with it)."""
        arrays = large_arrays(argument)
        if not arrays or self._failure is not None:
            yield
            return
        try:
            with self.active():
                locked = lock_pages(arrays)
        except Exception:  # only a speed-up: whatever fails here, the copies run from pageable memory
            locked = []
        try:
            yield
        finally:
            if self._failure is None and locked:
                with contextlib.suppress(Exception), self.active():  # as above: never the call's failure
                    unlock_pages(locked)

    def close(self) -> None:
        if self._context is None:
            return
        if self._failure is None:
            self._functions.clear()  # unload the modules while their context lives
            self._context.detach()
        else:
            _STRANDED.extend([self._context, dict(self._functions)])
        self._functions.clear()
        self._context = None

    def _open_context(self) -> None:
        self._context = self.device.make_context()
        self.driver.Context.pop()  # made current only around each call (see active)

    @contextlib.contextmanager
    def active(self):
        """This backend's context, current for the duration of one call."""
        self._context.push()
        try:
            yield
        finally:
            with contextlib.suppress(*self._errors_after_failure()):
                self.driver.Context.pop()

    def _errors_after_failure(self) -> tuple[type, ...]:
        """CUDA errors to ignore while tearing down: none, unless the context is spoiled."""
        return (self.driver.Error,) if self._failure is not None else ()

    def check_usable(self) -> None:
        """Refuse work once CUDA is spoiled for this process; only a new process recovers."""
        if self._failure is not None:
            raise LaunchFailure(
                f"the GPU cannot be used again in this process ({self._failure}); "
                "the grader must start a fresh worker"
            )

    def function(self, program: Program, shared_bytes: int = 0):
        """The loaded kernel, allowed ``shared_bytes`` of dynamic shared memory."""
        self.check_usable()
        if program not in self._functions:
            compiled = compile_cubin(program, self.arch)
            with self.active(), self.cuda_failures(program, CompileError):
                module = self.driver.module_from_buffer(compiled.cubin)
                self._functions[program] = (module, module.get_function(compiled.lowered_name))
        function = self._functions[program][1]
        if shared_bytes > DEFAULT_SHARED_LIMIT:  # past 48 KiB the kernel must opt in
            function.set_attribute(self.driver.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes)
        return function

    def _run(self, function, launch: Launch, allocations: dict) -> tuple[float, str]:
        """Launch once and wait; return the device time in ms and the kernel's printf output."""
        args = [kernel_arg(arg, allocations, self.canary_bytes) for arg in launch.args]
        start, end = self.driver.Event(), self.driver.Event()
        with _captured_stdout() as printed:
            start.record()
            function(*args, grid=launch.grid, block=launch.block, shared=launch.shared_bytes)
            end.record()
            self._wait(end, launch)
            stdout = printed()
        return start.time_till(end), stdout

    def _wait(self, end, launch: Launch) -> None:
        deadline = time.monotonic() + launch.time_limit_s
        pause = 1e-5
        while not end.query():
            if time.monotonic() > deadline:
                self._failure = "an earlier kernel never finished and still occupies the GPU"
                raise LaunchTimeout(
                    f"{launch.program.filename}: the kernel did not finish within "
                    f"{launch.time_limit_s:g} s (an endless loop, or a wait on other threads?)"
                )
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)
        end.synchronize()  # also flushes the kernel's printf buffer

    def _free(self, allocations) -> None:
        if self._failure is not None:  # the memory goes with the process
            _STRANDED.extend(allocations)
            return
        for allocation in allocations:
            allocation.free()

    @contextlib.contextmanager
    def cuda_failures(self, program: Program, error_class: type):
        """Turn a CUDA error into ``error_class`` for the student; note whether CUDA survived it."""
        try:
            yield
        except self.driver.Error as e:
            raise error_class(f"{program.filename}: {_describe(e, self._survived(e))}") from e

    @contextlib.contextmanager
    def grader_failures(self, what: str):
        """CUDA failing in the grader's own work around a kernel is the grader's fault: the copies
        before the kernel or after it finished (its faults surface when it is waited for), a timing
        session's uploads and buffers: its memory, its driver, its machine. Raised as
        :class:`GraderCudaFault`, which grading reports as its own fault, flagged for regrading,
        never as the kernel's wrong answer."""
        try:
            yield
        except self.driver.Error as e:
            self._survived(e)
            raise GraderCudaFault(f"{what} failed: {e}") from e

    def _survived(self, error) -> bool:
        """Whether CUDA survived ``error``: not after a sticky one (a crashed kernel), when every
        later CUDA call fails too; ``error`` is then noted as why this process cannot use CUDA."""
        try:
            self.driver.Context.synchronize()
        except self.driver.Error:
            self._failure = str(error)
            return False
        return True


class GraderCudaFault(AutograderError, RuntimeError):
    """CUDA failed in the grader's own work on the GPU (a copy, a timing session's buffers), not in
    the kernel: the grader's problem."""


def refuse_cooperative(launch: Launch) -> None:
    """PyCUDA has no cooperative launch (cuLaunchCooperativeKernel), and an ordinary one
    leaves grid.sync() without its workspace: it traps ("unspecified launch failure")."""
    if launch.cooperative:
        raise Unsupported(
            f"{launch.program.filename}: the gpu backend cannot make a cooperative launch "
            "(cudaLaunchCooperativeKernel), which this kernel needs for grid.sync(); the "
            "emulator backend runs it"
        )


def _describe(error, survived: bool) -> str:
    """``cuEventQuery failed: an illegal memory access was encountered`` -> a student's sentence."""
    call, _, reason = str(error).partition(" failed: ")
    reason = reason or call
    if call.startswith("cuModuleLoad"):
        return f"the GPU could not load the compiled kernel: {reason}"
    if survived:  # e.g. cuFuncSetBlockShape: invalid argument (more than 1024 threads)
        return f"the GPU refused the launch: {reason}"
    return f"the kernel crashed on the GPU: {reason} (the emulator backend names the thread and line)"


def to_device(driver, buffer: Buffer, canary: int):
    """One allocation: ``canary`` bytes of ``CANARY_BYTE``, the buffer's bytes, ``canary`` more.

    The zones are set on the device and the bytes copied straight from the buffer, not
    through a padded copy on the host (a 2**26-element case has three 256 MiB buffers).
    ``driver`` is ``pycuda.driver``, or the unit tests' stand-in that keeps memory on the host.
    """
    data = np.ascontiguousarray(buffer.data).reshape(-1).view(np.uint8)
    allocation = driver.mem_alloc(2 * canary + data.size)
    if canary:
        driver.memset_d8(allocation, CANARY_BYTE, canary)
        driver.memset_d8(int(allocation) + canary + data.size, CANARY_BYTE, canary)
    if data.size:
        driver.memcpy_htod(int(allocation) + canary, data)
    return allocation


def from_device(driver, buffer: Buffer, allocation, canary: int) -> tuple[np.ndarray, list[Finding]]:
    """The buffer's contents after the launch, and a finding for each written canary zone."""
    contents = np.empty(buffer.data.size, dtype=buffer.data.dtype)
    before, after = np.empty(canary, np.uint8), np.empty(canary, np.uint8)
    if contents.nbytes:
        driver.memcpy_dtoh(contents, int(allocation) + canary)
    if canary:
        driver.memcpy_dtoh(before, allocation)
        driver.memcpy_dtoh(after, int(allocation) + canary + contents.nbytes)
    return contents, _zone_findings(buffer, before, after)


def kernel_arg(arg, allocations: dict, canary: int):
    """A buffer's device pointer (past its leading canary zone) or a scalar, as the kernel takes it."""
    if isinstance(arg, Buffer):
        return np.uintp(int(allocations[arg.name]) + canary)
    return np.dtype(arg.dtype).type(arg.value)


def _zone_findings(buffer: Buffer, before_zone: np.ndarray, after_zone: np.ndarray) -> list[Finding]:
    """A finding for each canary zone (the bytes before and after the buffer) with a changed byte."""
    n = buffer.data.size
    itemsize = buffer.data.dtype.itemsize
    before = np.flatnonzero(before_zone != CANARY_BYTE) - before_zone.size
    after = np.flatnonzero(after_zone != CANARY_BYTE)
    zones = [
        (np.unique(before // itemsize), "before the start"),
        (n + np.unique(after // itemsize), "past the end"),
    ]
    return [_canary_finding(buffer.name, n, indices, where) for indices, where in zones if indices.size]


def _canary_finding(name: str, n: int, indices: np.ndarray, where: str) -> Finding:
    lo, hi = int(indices[0]), int(indices[-1])
    span = f"{lo}" if lo == hi else f"{lo}..{hi}"
    gaps = "" if indices.size == hi - lo + 1 else f"; {indices.size} of those elements changed"
    return Finding(
        kind="out_of_bounds_write",
        message=f"{name}[{span}] written {where} (n = {counted(n, 'element')}{gaps})",
        array=name,
        index=lo if where == "past the end" else hi,
        bound=n,
    )


@contextlib.contextmanager
def _captured_stdout():
    """Collect what the kernel's ``printf`` writes to file descriptor 1 (flushed at a sync)."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield lambda: _read_sink(libc, sink)
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)


def _read_sink(libc, sink) -> str:
    libc.fflush(None)
    sink.seek(0)
    return sink.read(PRINTF_LIMIT).decode(errors="replace")
