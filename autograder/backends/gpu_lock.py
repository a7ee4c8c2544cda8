"""One GPU: a timing has it alone; launches share it, but never with a timing.

A timing compares two kernels' medians to within 0.08 % at best (``gpu_timing``); another process's
kernels or copies on the same GPU meanwhile would slow whichever kernel ran then. A batch
may share a GPU among several GPU tasks (``autograder batch --tasks-per-gpu``), so that one
task's host work (drawing inputs, moving them to its worker, comparing outputs, compiling)
overlaps another's GPU work; this lock keeps their timings apart from everything else. A
launch (a correctness or gating case, copies in and out included) is timed by nobody, so
launches of several tasks run side by side, their copies and host work overlapping: they
share the lock, and a timing waits until none runs (a launch's ``elapsed_ms``, evidence for
a TA and never scored, may then include another task's kernels).

It is an advisory ``flock`` on a file of the temporary folder named after the GPUs the
process sees (``CUDA_VISIBLE_DEVICES``, which Ray sets for each task to the GPU it gave it;
unset, it names every GPU): shared by launches, exclusive for a timing. A second file beside it
is the queue: each asker takes it in turn, and a timing keeps it while it waits for the
launches running to end, so that launches asking later wait behind the timing instead of
starving it. The operating system releases both when their holder exits or is killed, so a
worker stopped in an endless kernel never leaves them held. The grader takes the lock once
its worker has the call's arguments, and only then lets the worker start and the call's time
limit run (``worker.WorkerBackend``): moving a case's arrays is not the GPU's work, and the
time spent waiting for the GPU never counts against a launch's time limit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path


def lock_path() -> Path:
    """The lock file of the GPUs this process sees."""
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "all").strip() or "none"
    return Path(tempfile.gettempdir()) / f"autograder-gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', devices)}.lock"


@contextlib.contextmanager
def held(path: Path, alone: bool = True) -> Iterator[None]:
    """The GPU of ``path`` (:func:`lock_path`) until the block ends: to this process ``alone`` (a
    timing), or shared with other launches (a launch); waits for whoever holds it otherwise."""
    queue, lock = _opened(_queue_path(path)), _opened(path)
    try:
        fcntl.flock(queue, fcntl.LOCK_EX)  # in line: nobody asking after us passes us
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(queue, fcntl.LOCK_UN)
        yield
    finally:
        os.close(lock)  # closing the only descriptor of its open file releases the lock
        os.close(queue)


def _queue_path(path: Path) -> Path:
    return path.with_suffix(".queue")


def _opened(path: Path) -> int:
    # read-only, so that a file another user made (mode 0644 under their umask) still opens;
    # no symlink followed in a shared folder
    return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o666)
