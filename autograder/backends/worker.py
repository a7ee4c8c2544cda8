"""Any backend in a killable worker subprocess (docs/backend-contract.md, "Isolation").

The worker is a fresh Python process running :func:`serve` (no inherited CUDA context, no
forked locks), in a session of its own, that builds the backend from a picklable factory
and serves the contract's calls (``compile``, ``launch``, ``time``) over a socket pair.
The grader waits for each answer no longer than the call's time limit: a call that
outlives it kills the worker's whole process group (:class:`LaunchTimeout`), a worker that
dies (segfault, ``os._exit``, memory) becomes :class:`LaunchFailure`, and the next call
starts a fresh worker. Start-up time (imports, a CUDA context) is not charged
to the kernel: the worker reports ready before the first call is timed. A GPU worker's launches
and timings hold its GPU's lock (``gpu_lock``: a timing has the GPU alone, launches of tasks
sharing a device run side by side) from the moment their arguments are in the worker, their host
memory prepared (``Backend.prepared``: page-locked, so that the copies under the lock run at the
copy engine's rate), until their answer is ready, and the call's time limit starts once the lock
is held.

Large arrays do not travel through the socket: a message's buffers of ``SHARED_BYTES`` or more
(the inputs and outputs of a 2**26-element case, a timing request's input sets) are pickled out
of band (protocol 5) into an anonymous shared-memory file whose descriptor is passed along;
the receiver maps it and its arrays are views of that mapping (no copy, no pickling of the
bytes); a large array holding one value throughout (a poisoned output) travels as that value.
A pipe moved about 0.3 GB/s on the H200's host, and a timing request of vector_add is 2.4 GB.

``command`` runs the worker under another program (``compute-sanitizer --tool memcheck
...``): the ``--sanitize`` cross-check is this same worker, watched, not a second mechanism.

Memory: the worker volunteers to be the first process the kernel's OOM killer takes
(``oom_score_adj`` 1000), so that in a small container (Gradescope's has 768 MB) a
runaway compile or launch kills the worker, never the grader that must write
``results.json``; with ``memory_mb`` its data segment is also capped (``RLIMIT_DATA``), so
such a compile fails inside the worker instead of eating the machine (a macro bomb made
NVRTC take 10 GB in 60 s here).
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import mmap
import os
import pickle
import resource
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Pipe
from pathlib import Path

import numpy as np

from autograder import contract
from autograder.backends import gpu_lock
from autograder.backends.pinned import empty_in_own_pages
from autograder.contract import (
    Backend,
    BackendError,
    Capabilities,
    CompileError,
    Launch,
    LaunchFailure,
    LaunchResult,
    LaunchTimeout,
    Program,
    Timing,
    TimingRequest,
)
from autograder.errors import AutograderError

NOTHING = Capabilities()
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # where ``autograder`` imports from
SHARED_BYTES = 1 << 20  # buffers from this size travel in shared memory, not through the socket
READY = b"R"  # a call that runs kernels on a GPU: the worker has it, its host memory prepared
GO = b"G"  # after READY: the grader holds the GPU's lock now
_ALIGN = 4096  # each buffer's offset in the shared file: page-aligned arrays


class WorkerError(AutograderError, RuntimeError):
    """The backend raised something other than a BackendError: a grader bug, with its traceback."""


class WorkerBackend(Backend):
    """Runs ``factory()`` (a Backend) in a worker subprocess, restarted after every failure."""

    def __init__(
        self,
        factory: Callable[[], Backend],
        name: str,
        capabilities: Capabilities = NOTHING,
        compile_s: float = 60,
        start_s: float = 90,
        memory_mb: int | None = None,
        command: Sequence[str] = (),
        stop_s: float = 5,
    ):
        self.factory = factory
        self.name = name
        self.capabilities = capabilities
        self.compile_s = compile_s
        self.start_s = start_s
        self.memory_mb = memory_mb
        self.command = tuple(command)  # a program the worker runs under, e.g. compute-sanitizer
        self.stop_s = stop_s  # how long ``close`` waits for the worker (and its watcher) to exit
        self.starts = 0  # how many workers were started (tests read it)
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._starting = False  # spawned by prestart(), its ready message not read yet
        self._device = gpu_lock.lock_path() if capabilities.runs_natively else None  # its GPU's lock

    def compile(self, program: Program) -> None:
        self._call("compile", program, self.compile_s)

    def compile_ahead(self, programs: tuple[Program, ...]) -> None:
        self._call("compile_ahead", programs, self.compile_s)

    def launch(self, launch: Launch) -> LaunchResult:
        return self._call("launch", launch, launch.time_limit_s, self._device, alone=False)

    def time(self, request: TimingRequest) -> Timing:
        return self._call("time", request, request.limit_s, self._device, alone=True)

    def close(self) -> None:
        """Ask the worker to exit and wait (a watcher writes its report then); kill it past ``stop_s``.

        After a crash too: the worker answered, so it can exit on its own, and a watcher such as
        compute-sanitizer finishes its report only when it does.
        """
        if self._process is None:
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            send(self._conn, None)
            self._process.wait(timeout=self.stop_s)
        self._stop()

    def _call(self, method: str, argument, limit_s: float, device: Path | None = None, alone: bool = True):
        """``method(argument)`` in the worker, its answer awaited ``limit_s``. With ``device`` (a
        GPU's lock, ``gpu_lock``) the call runs kernels: the worker receives it (its arrays moved
        into shared memory, mapped), prepares its host memory (``Backend.prepared``: the GPU's
        page-locks large arrays) and says READY; only then does the grader ask for the GPU, and
        once it is this process's (``alone``, or shared with other launches) it gives the go; the
        limit starts there, so neither the preparing nor the wait for the GPU is charged."""
        self._ensure_started()
        conn = self._conn
        assert conn is not None  # _ensure_started started it
        try:
            send(conn, (method, argument, device is not None))
            if device and not _ready(conn, limit_s):
                self._stop()
                raise WorkerError(f"the {self.name} worker did not take a {method} call within {limit_s:g} s")
            with gpu_lock.held(device, alone) if device else contextlib.nullcontext():
                if device:
                    conn.send_bytes(GO)
                answered = _readable(conn, limit_s)
            if not answered:
                self._stop()
                raise _timeout(method, limit_s)
            answer = receive(conn)
        except (EOFError, OSError) as e:
            raise LaunchFailure(self._death_message(method)) from e
        except BaseException:  # Ctrl-C, SIGTERM: the worker is busy and its answer would be stale
            self._stop()
            raise
        if _crashed(answer):
            self.close()  # a crash can spoil the backend for good (a lost CUDA context stays lost)
        return _unpack(answer)

    def prestart(self) -> None:
        """Start the worker without waiting for it: its imports (and a CUDA context) overlap the
        grader's own work and the other worker's start. The first call waits for it to be ready."""
        if self._process is None:
            try:
                self._spawn()
            except BaseException:
                self._stop()
                raise

    def _ensure_started(self) -> None:
        if self._process is not None and self._process.poll() is None and not self._starting:
            return
        if self._process is None or self._process.poll() is not None:
            self._stop()
        try:
            if self._process is None:
                self._spawn()
            self._await_ready()
        except BaseException:  # an interrupt mid-start would leave the ready message for the next call
            self._stop()
            raise

    def _spawn(self) -> None:
        self._conn, child = Pipe()
        serve_call = f"from autograder.backends.worker import serve; serve({child.fileno()})"
        command = [*self.command, sys.executable, "-c", serve_call]
        path = os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
        self._process = subprocess.Popen(
            command,
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        child.close()
        self.starts += 1
        self._conn.send(sys.path)  # first, so that the factory unpickles there
        self._conn.send((self.factory, self.memory_mb))
        self._starting = True
        self._started_at = time.monotonic()

    def _await_ready(self) -> None:
        """Wait for the worker's ready message (``start_s`` from its spawn)."""
        if not self._conn.poll(max(0.0, self._started_at + self.start_s - time.monotonic())):
            self._stop()
            raise WorkerError(f"the {self.name} worker did not start within {self.start_s:g} s")
        try:
            _unpack(self._conn.recv())
        except EOFError as e:
            raise WorkerError(self._death_message("start")) from e
        self._starting = False

    def _death_message(self, method: str) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=5)
        code = self._process.returncode
        self._stop()
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        what = "the kernel" if method == "launch" else f"{method} on the {self.name} backend"
        return f"{what} crashed the grading worker ({how}); the remaining items run in a fresh worker"

    def _stop(self) -> None:
        """Kill the worker's process group (its watcher too) and forget it."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        if self._conn is not None:
            self._conn.close()
        self._process = None
        self._conn = None
        self._starting = False


def _readable(conn: Connection, limit_s: float) -> bool:
    """``conn.poll(limit_s)`` without its selector made and dropped for every call (4 µs of
    a small launch's round trip): anything but silence (data, the worker gone) is an answer."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(max(0, math.ceil(limit_s * 1000))))


def _ready(conn: Connection, limit_s: float) -> bool:
    """Whether the worker said READY within ``limit_s``: it has the call and has prepared its
    host memory (``Backend.prepared``); EOFError if it died meanwhile."""
    if not _readable(conn, limit_s):
        return False
    said = conn.recv_bytes()
    if said != READY:
        raise OSError(f"the worker said {said[:16]!r} where it should have said it was ready")
    return True


def _timeout(method: str, limit_s: float) -> BackendError:
    if method == "compile":
        return CompileError(f"compilation did not finish within {limit_s:g} s")
    return LaunchTimeout(f"the kernel did not finish within {limit_s:g} s and was stopped (an endless loop?)")


def serve(fd: int) -> None:
    """The worker's side: build the backend, then answer calls until told to stop (or orphaned).

    Before it returns (and Python exits, the grader waiting), every object the worker holds is
    frozen (``gc.freeze``): Python's exit runs full collections of the cyclic garbage collector
    over every object still alive, and an emulator worker's 300 000 (decoded kernels, kept chunks,
    their executors) took 0.8-0.9 s of CPU there, a tenth of a grading's, for memory the process
    gives back as it ends; its exit still closes what it opened and runs its exit handlers."""
    conn = Connection(fd)
    sys.path[:0] = [entry for entry in conn.recv() if entry not in sys.path]  # the grader's import path
    factory, memory_mb = conn.recv()
    _confine(memory_mb)
    try:
        backend = factory()
    except Exception as e:  # reported to the grader, then the worker exits
        conn.send(_pack_error(e))
        return
    conn.send(("ok", None))
    with contextlib.suppress(EOFError):  # the grader went away
        while (message := receive(conn)) is not None:
            method, argument, gated = message
            with backend.prepared(argument) if gated else contextlib.nullcontext():
                if gated:
                    conn.send_bytes(READY)
                    conn.recv_bytes()  # the go: the grader holds the GPU now
                try:
                    send(conn, ("ok", getattr(backend, method)(argument)))
                except Exception as e:  # everything goes back to the grader (an unpicklable answer too)
                    send(conn, _pack_error(e))
            del message, argument  # the request's shared memory goes once it is answered
    backend.close()
    gc.freeze()  # the full collections of its exit pass over nothing it built (the docstring)


def send(conn: Connection, value) -> None:
    """Pickle ``value`` to ``conn``; its large buffers through one shared-memory file (see above)."""
    large: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < SHARED_BYTES:
            return True  # small: in the pickle itself
        large.append(buffer)
        return False

    payload = _pickled(value, out_of_band)
    fd = _shared_file(large) if large else None
    if fd is None:
        conn.send_bytes(b"P" + (_pickled(value) if large else payload))
        return
    try:
        sizes = [b.raw().nbytes for b in large]
        conn.send_bytes(b"S" + pickle.dumps((payload, sizes), protocol=5))
        with socket.socket(fileno=os.dup(conn.fileno())) as sock:
            socket.send_fds(sock, [b"F"], [fd])
    finally:
        os.close(fd)


def receive(conn: Connection):
    """The value :func:`send` sent: its large buffers are views of the shared file."""
    message = conn.recv_bytes()
    if message[:1] == b"P":
        return pickle.loads(message[1:])
    payload, sizes = pickle.loads(message[1:])
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        data, fds, _flags, _address = socket.recv_fds(sock, 1, 1)
    if not data or not fds:
        raise EOFError("the shared memory of a message did not arrive")
    try:
        length = max(_offsets(sizes)[-1], 1)
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        view = memoryview(mmap.mmap(fds[0], length, flags=flags))
    finally:
        os.close(fds[0])
    offsets = _offsets(sizes)
    return pickle.loads(payload, buffers=[view[o : o + n] for o, n in zip(offsets, sizes, strict=False)])


def _pickled(value, buffer_callback=None) -> bytes:
    file = io.BytesIO()
    _Pickler(file, protocol=5, buffer_callback=buffer_callback).dump(value)
    return file.getvalue()


class _Pickler(pickle.Pickler):
    """Protocol 5, and a large array holding one value throughout (an output poisoned with NaN
    before its launch) travels as that value: no bytes to copy, the receiver fills it again. A
    small array of numbers travels as its bytes, its type's name and its shape (``_small``):
    numpy's own reduction took 9 µs an array, most of a small launch's pickling."""

    def reducer_override(self, obj):
        if type(obj) is not np.ndarray:
            return NotImplemented
        if obj.nbytes >= SHARED_BYTES:
            word = _constant(obj)
            return NotImplemented if word is None else (_filled, (obj.shape, obj.dtype, word))
        if obj.flags.c_contiguous and obj.dtype.kind in "biufc" and obj.dtype.isbuiltin == 1:
            data = bytearray(obj) if obj.flags.writeable else obj.tobytes()
            return _small, (data, obj.dtype.str, obj.shape)
        return NotImplemented


def _constant(array: np.ndarray) -> int | None:
    """The one value every element of ``array`` holds, as an unsigned integer of its bits; or None."""
    dtype = array.dtype
    if not array.flags.c_contiguous or dtype.itemsize not in (1, 2, 4, 8) or dtype.hasobject or dtype.names:
        return None
    words = array.reshape(-1).view(f"u{dtype.itemsize}")
    first = words[0]
    if not (words[:4096] == first).all() or not (words == first).all():  # random data fails at once
        return None
    return int(first)


def _small(data: bytes | bytearray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The array ``_Pickler`` sent as its bytes: writable where it was (``data`` a bytearray),
    as numpy's own unpickling makes it."""
    return np.frombuffer(data, dtype).reshape(shape)


def _filled(shape: tuple[int, ...], dtype: np.dtype, word: int) -> np.ndarray:
    """The array :func:`_constant` described, bit for bit, in pages of its own (a GPU call may
    page-lock it: ``pinned.py``)."""
    array = empty_in_own_pages(shape, dtype)
    array.reshape(-1).view(f"u{dtype.itemsize}").fill(word)
    return array


def _offsets(sizes: list[int]) -> list[int]:
    """Each buffer's page-aligned offset in the shared file, and its total length last."""
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + -(-size // _ALIGN) * _ALIGN)
    return offsets


def _shared_file(buffers: list[pickle.PickleBuffer]) -> int | None:
    """An anonymous shared-memory file holding ``buffers``; None where there is none (not Linux)."""
    try:
        fd = os.memfd_create("autograder-message", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None
    try:
        offsets = _offsets([b.raw().nbytes for b in buffers])
        os.ftruncate(fd, max(offsets[-1], 1))
        for buffer, offset in zip(buffers, offsets, strict=False):
            data = buffer.raw()
            written = 0
            while written < data.nbytes:  # one write moves at most about 2 GiB
                written += os.pwrite(fd, data[written:], offset + written)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _confine(memory_mb: int | None) -> None:
    """First in line for the OOM killer; data capped at ``memory_mb`` when given."""
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")
    if memory_mb:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _crashed(answer: tuple) -> bool:
    """The backend reported a crashed or hung launch: the next call needs a fresh worker."""
    return answer[0] == "backend_error" and bool({"LaunchFailure", "LaunchTimeout"} & set(answer[1]))


def _pack_error(e: Exception) -> tuple:
    if isinstance(e, BackendError):
        names = [c.__name__ for c in type(e).__mro__]
        return ("backend_error", names, str(e), getattr(e, "log", None))
    return ("grader_error", "".join(traceback.format_exception(e)))


def _unpack(answer: tuple):
    """Return the worker's value or re-raise its error in this process."""
    if answer[0] == "ok":
        return answer[1]
    if answer[0] == "backend_error":
        _kind, class_names, message, log = answer
        error_class = next(
            getattr(contract, n) for n in class_names if n in vars(contract)
        )  # BackendError at worst
        if error_class is CompileError:
            raise CompileError(log if log is not None else message)
        raise error_class(message)
    raise WorkerError(f"the backend raised an unexpected error (a grader bug):\n{answer[1]}")
