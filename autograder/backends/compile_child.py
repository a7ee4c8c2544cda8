"""A compile in a forked child process: what a crash of NVRTC or ptxas kills instead of the grader.

A fork per compile, not a fresh interpreter (which spends 340 ms importing NVRTC) nor a
long-lived compile server (which a hostile compile could leave corrupt for the next student's):
the child has NVRTC loaded already and dies with its compile. The child only calls NVRTC and
pickles its answer into a pipe, then leaves with ``os._exit`` (no atexit handler, no flush of the
parent's buffers); it dies with its parent (``PR_SET_PDEATHSIG``), so a grader killed for its time
limit leaves no compile running. Its memory limits are its parent's (a worker's ``RLIMIT_DATA``).

:class:`Child` is one such compile: started at once, its answer read when it is wanted
(:meth:`Child.answer`) and, in between, as it comes (:meth:`Child.poll`), so that a compile
started ahead (``compile_ahead``) runs on another core while its parent goes on.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from autograder.contract import CompileError, Program

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when its parent dies

GO = b"g"  # what a held child waits for
T = TypeVar("T")  # what the compile returns: compiler._compile_here's Compiled


def in_child(compile_: Callable[[Program, str], T], program: Program, arch: str) -> T | int:
    """``compile_(program, arch)`` in a forked child, waited for: its result, its exception raised
    here, or the number of the signal that killed the child (a crash inside NVRTC or ptxas)."""
    if not hasattr(os, "fork"):  # Windows: no fork, and no isolation
        return compile_(program, arch)
    return Child(compile_, program, arch).answer()


class Child(Generic[T]):
    """``compile_(program, arch)`` running in a forked child (POSIX only)."""

    def __init__(
        self, compile_: Callable[[Program, str], T], program: Program, arch: str, held: bool = False
    ):
        """Fork the child; ``held``: it waits for :meth:`go` (or its parent's end) before it compiles."""
        from cuda.bindings import nvrtc  # loaded before the fork: the child imports nothing

        nvrtc.nvrtcVersion()
        readable, writable = os.pipe()
        wait, self._go = os.pipe() if held else (-1, -1)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                os.close(readable)
                _die_with(parent)
                if held:
                    os.close(self._go)
                    if os.read(wait, 1) != GO:
                        os._exit(0)  # stopped before its turn
                if faulthandler.is_enabled():
                    faulthandler.disable()  # a crash here is reported by the parent, not as a traceback
                try:
                    answer = pickle.dumps(("compiled", compile_(program, arch)))
                except BaseException as error:  # any: raised again in the parent
                    answer = _pickled_error(error)
                with os.fdopen(writable, "wb") as pipe:
                    pipe.write(answer)
            finally:
                os._exit(0)
        os.close(writable)
        if held:
            os.close(wait)
        self.pid = pid
        os.set_blocking(readable, False)  # poll() reads what there is; answer() waits for the rest
        self._pipe = os.fdopen(readable, "rb", buffering=0)
        self._read: list[bytes] = []
        self._ended = False  # the child closed its end: every byte of its answer is read

    def go(self) -> None:
        """Let a held child compile (nothing for one that was not held, or was let go)."""
        if self._go >= 0:
            os.write(self._go, GO)
            os.close(self._go)
            self._go = -1

    def poll(self) -> bool:
        """Read what the child has written so far, without waiting; whether its answer is whole.
        (A big cubin outgrows the pipe's buffer: the child waits until its parent reads.)"""
        if not self._ended:
            while (chunk := self._pipe.read(1 << 20)) is not None and chunk:
                self._read.append(chunk)
            self._ended = chunk == b""
        return self._ended

    def answer(self) -> T | int:
        """Wait for the child: its result, its exception raised here, or the signal that killed it."""
        self.go()
        reaped = False
        try:
            if not self._ended:
                os.set_blocking(self._pipe.fileno(), True)
                self._read.append(self._pipe.read())  # all of it before waiting for the child
                self._ended = True
            _pid, status = os.waitpid(self.pid, 0)
            reaped = True
        finally:
            self._pipe.close()
            if not reaped:  # interrupted: leave no child behind
                self.kill()
        return _decoded(b"".join(self._read), status)

    def kill(self) -> None:
        """Stop the child and reap it (its answer, if any, is dropped)."""
        self._pipe.close()
        if self._go >= 0:
            os.close(self._go)
            self._go = -1
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped already
            return


def _decoded(answer: bytes, status: int) -> Any:
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    if not answer:
        raise CompileError(
            f"the compiler stopped without an answer (exit status {os.waitstatus_to_exitcode(status)})"
        )
    kind, value = pickle.loads(answer)
    if kind == "compiled":
        return value
    if kind == "refused":
        cls, log = value
        raise cls(log)
    raise value


def _die_with(parent: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the child ends with its compile anyway
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)


def _pickled_error(error: BaseException) -> bytes:
    """``error`` for the parent: a :class:`CompileError` as its class and log (pickling it
    whole would rebuild it from its message, "compilation failed:" twice)."""
    if isinstance(error, CompileError):
        return pickle.dumps(("refused", (type(error), error.log)))
    try:
        return pickle.dumps(("raised", error))
    except Exception:  # one that does not pickle is sent as its words
        return pickle.dumps(("raised", RuntimeError(f"{type(error).__name__}: {error}")))
