"""One GPU, one launch or timing at a time, whichever grading process asks.

A timing compares two kernels' medians to within 0.08 % (``gpu_timing``); another process's
kernels or copies on the same GPU meanwhile would slow whichever kernel ran then. A batch
may share a GPU among several GPU tasks (``autograder batch --tasks-per-gpu``), so that one
task's host work (drawing inputs, moving them to its worker, comparing outputs, compiling)
overlaps another's GPU work; this lock keeps their GPU work apart. The GPU's own work is
what it serializes: a launch (copies in and out included) or a whole timing session.

It is an advisory ``flock`` on a file of the temporary folder named after the GPUs the
process sees (``CUDA_VISIBLE_DEVICES``, which Ray sets for each task to the GPU it gave it;
unset, it names every GPU). The operating system releases it when its holder exits or is
killed, so a worker stopped in an endless kernel never leaves it held. The grader takes it
once its worker has the call's arguments, and only then lets the worker start and the call's
time limit run (``worker.WorkerBackend``): moving a case's arrays is not the GPU's work, and the
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
def held(path: Path) -> Iterator[None]:
    """The GPU of ``path`` (:func:`lock_path`) to this process alone until the block ends; waits
    for whoever holds it."""
    # read-only, so that a file another user made (mode 0644 under their umask) still opens;
    # no symlink followed in a shared folder
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the only descriptor of its open file releases the lock
