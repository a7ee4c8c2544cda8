"""Any backend in a killable worker subprocess (docs/backend-contract.md, "Isolation").

The worker is a fresh Python process running :func:`serve` (no inherited CUDA context, no
forked locks), in a session of its own, that builds the backend from a picklable factory
and serves the contract's calls (``compile``, ``launch``, ``time``) over a socket pair.
The grader waits for each answer no longer than the call's time limit: a call that
outlives it kills the worker's whole process group (:class:`LaunchTimeout`), a worker that
dies (segfault, ``os._exit``, memory) becomes :class:`LaunchFailure`, and the next call
starts a fresh worker. Start-up time (imports, a CUDA context) is not charged
to the kernel: the worker reports ready before the first call is timed.

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
import os
import resource
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Pipe
from pathlib import Path

from autograder.backends import base
from autograder.backends.base import (
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

NOTHING = Capabilities()
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # where ``autograder`` imports from


class WorkerError(RuntimeError):
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

    def compile(self, program: Program) -> None:
        self._call("compile", program, self.compile_s)

    def launch(self, launch: Launch) -> LaunchResult:
        return self._call("launch", launch, launch.time_limit_s)

    def time(self, request: TimingRequest) -> Timing:
        return self._call("time", request, request.limit_s)

    def close(self) -> None:
        """Ask the worker to exit and wait (a watcher writes its report then); kill it past ``stop_s``.

        After a crash too: the worker answered, so it can exit on its own, and a watcher such as
        compute-sanitizer finishes its report only when it does.
        """
        if self._process is None:
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self._conn.send(None)
            self._process.wait(timeout=self.stop_s)
        self._stop()

    def _call(self, method: str, argument, limit_s: float):
        self._ensure_started()
        try:
            self._conn.send((method, argument))
            if not self._conn.poll(limit_s):
                self._stop()
                raise _timeout(method, limit_s)
            answer = self._conn.recv()
        except (EOFError, OSError) as e:
            raise LaunchFailure(self._death_message(method)) from e
        except BaseException:  # Ctrl-C, SIGTERM: the worker is busy and its answer would be stale
            self._stop()
            raise
        if _crashed(answer):
            self.close()  # a crash can spoil the backend for good (a lost CUDA context stays lost)
        return _unpack(answer)

    def _ensure_started(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self._stop()
        try:
            self._start()
        except BaseException:  # an interrupt mid-start would leave the ready message for the next call
            self._stop()
            raise

    def _start(self) -> None:
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
        if not self._conn.poll(self.start_s):
            self._stop()
            raise WorkerError(f"the {self.name} worker did not start within {self.start_s:g} s")
        try:
            _unpack(self._conn.recv())
        except EOFError as e:
            raise WorkerError(self._death_message("start")) from e

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


def _timeout(method: str, limit_s: float) -> BackendError:
    if method == "compile":
        return CompileError(f"compilation did not finish within {limit_s:g} s")
    return LaunchTimeout(f"the kernel did not finish within {limit_s:g} s and was stopped (an endless loop?)")


def serve(fd: int) -> None:
    """The worker's side: build the backend, then answer calls until told to stop (or orphaned)."""
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
        while (message := conn.recv()) is not None:
            method, argument = message
            try:
                conn.send(("ok", getattr(backend, method)(argument)))
            except Exception as e:  # everything goes back to the grader
                conn.send(_pack_error(e))
    backend.close()


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
        error_class = next(getattr(base, n) for n in class_names if n in vars(base))  # BackendError at worst
        if error_class is CompileError:
            raise CompileError(log if log is not None else message)
        raise error_class(message)
    raise WorkerError(f"the backend raised an unexpected error (a grader bug):\n{answer[1]}")
