"""Any backend in a killable worker subprocess (docs/backend-contract.md, "Isolation").

The worker is a ``spawn``-ed process (no inherited CUDA context, no forked locks) that
builds the backend from a picklable factory and serves ``compile`` and ``launch`` calls
over a pipe. The grader waits for each answer no longer than the call's time limit: a
launch that outlives ``Launch.time_limit_s`` kills the worker (:class:`LaunchTimeout`), a
worker that dies (segfault, ``os._exit``, memory) becomes :class:`LaunchFailure`, and the
next call starts a fresh worker. Start-up time (imports, a CUDA context) is not charged
to the kernel: the worker reports ready before the first call is timed.

Memory: the worker volunteers to be the first process the kernel's OOM killer takes
(``oom_score_adj`` 1000), so that in a small container (Gradescope's has 768 MB) a
runaway compile or launch kills the worker, never the grader that must write
``results.json``; with ``memory_mb`` its data segment is also capped (``RLIMIT_DATA``), so
such a compile fails inside the worker instead of eating the machine (a macro bomb made
NVRTC take 10 GB in 60 s here).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import resource
import signal
import traceback
from collections.abc import Callable
from pathlib import Path

from autograder.backends import base
from autograder.backends.base import (
    Backend,
    BackendError,
    CompileError,
    Launch,
    LaunchFailure,
    LaunchResult,
    LaunchTimeout,
    Program,
)


class WorkerError(RuntimeError):
    """The backend raised something other than a BackendError: a grader bug, with its traceback."""


class WorkerBackend(Backend):
    """Runs ``factory()`` (a Backend) in a worker subprocess, restarted after every failure."""

    def __init__(self, factory: Callable[[], Backend], name: str, compile_s: float = 60, start_s: float = 90,
                 memory_mb: int | None = None):
        self.factory = factory
        self.name = name
        self.compile_s = compile_s
        self.start_s = start_s
        self.memory_mb = memory_mb
        self.starts = 0  # how many workers were started (tests read it)
        self._process = None
        self._conn = None

    def compile(self, program: Program) -> None:
        self._call("compile", program, self.compile_s)

    def launch(self, launch: Launch) -> LaunchResult:
        return self._call("launch", launch, launch.time_limit_s)

    def time(self, request):
        """``gpu_timing.time_case`` in the worker (a GPU backend), within the request's limit."""
        return self._call("time", request, request.limit_s)

    def close(self) -> None:
        if self._process is None:
            return
        try:
            self._conn.send(None)
            self._process.join(timeout=5)
        except (OSError, BrokenPipeError):
            pass
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
            self._stop()  # a crash can spoil the backend for good (a lost CUDA context stays lost)
        return _unpack(answer)

    def _ensure_started(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        self._stop()
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        arguments = (child, self.factory, self.memory_mb)
        self._process = context.Process(target=_serve, args=arguments, daemon=True)
        self._process.start()
        child.close()
        self.starts += 1
        if not self._conn.poll(self.start_s):
            self._stop()
            raise WorkerError(f"the {self.name} worker did not start within {self.start_s:g} s")
        try:
            _unpack(self._conn.recv())
        except EOFError as e:
            raise WorkerError(self._death_message("start")) from e

    def _death_message(self, method: str) -> str:
        self._process.join(timeout=5)
        code = self._process.exitcode
        self._stop()
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        what = "the kernel" if method == "launch" else f"{method} on the {self.name} backend"
        return f"{what} crashed the grading worker ({how}); the remaining items run in a fresh worker"

    def _stop(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._process = None
        self._conn = None


def _timeout(method: str, limit_s: float) -> BackendError:
    if method == "compile":
        return CompileError(f"compilation did not finish within {limit_s:g} s")
    return LaunchTimeout(f"the kernel did not finish within {limit_s:g} s and was stopped (an endless loop?)")


def _serve(conn, factory: Callable[[], Backend], memory_mb: int | None = None) -> None:
    """The worker's loop: build the backend, then answer calls until told to stop."""
    _confine(memory_mb)
    try:
        backend = factory()
    except Exception as e:  # reported to the grader, then the worker exits
        conn.send(_pack_error(e))
        return
    conn.send(("ok", None))
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
