"""Which host arrays a GPU call page-locks, and over which pages (``backends/pinned.py``)."""

import numpy as np

from autograder.backends.pinned import LOCK_BYTES, large_arrays, page_ranges
from autograder.contract import Buffer, Launch, Program, Scalar, TimingRequest

PAGE = 4096


def launch(*sizes: int) -> Launch:
    args = (*(Buffer(f"x{k}", np.zeros(n, np.uint8)) for k, n in enumerate(sizes)), Scalar("n", 1))
    return Launch(Program("", "k.cu", "k"), (1, 1, 1), (1, 1, 1), args)


def test_only_arrays_of_a_lock_worth_are_locked_from_launches_and_timing_requests():
    small, large = LOCK_BYTES - 1, LOCK_BYTES
    assert [a.nbytes for a in large_arrays(launch(small, large))] == [large]
    request = TimingRequest((launch(large), launch(small, large)), Program("", "k.cu", "k"), {}, 0.0, 0.0)
    assert [a.nbytes for a in large_arrays(request)] == [large, large]
    strided = Launch(
        Program("", "k.cu", "k"), (1, 1, 1), (1, 1, 1), (Buffer("x", np.zeros(2 * large, np.uint8)[::2]),)
    )
    assert large_arrays(strided) == []  # its bytes do not lie in one range


def test_ranges_cover_whole_pages_and_merge_where_arrays_share_one():
    memory = np.zeros(10 * PAGE, np.uint8)
    base = memory.__array_interface__["data"][0]
    first = base // PAGE * PAGE + PAGE  # a page boundary inside ``memory``
    at = first - base
    one = memory[at + 10 : at + PAGE + 20]  # pages 0 and 1 (from ``first``)
    two = memory[at + PAGE + 30 : at + 2 * PAGE]  # page 1: shared with ``one``
    three = memory[at + 3 * PAGE : at + 3 * PAGE + 100]  # page 3, its start
    empty = memory[at:at]
    assert page_ranges([three, one, two, empty], PAGE) == [(first, 2 * PAGE), (first + 3 * PAGE, PAGE)]


def test_a_failure_to_lock_leaves_the_call_to_run_unlocked(monkeypatch):
    """Page-locking is only a speed-up: a GPU backend whose locking fails (no driver bindings, a
    refused range) still runs the call, its copies from pageable memory."""
    import contextlib

    from autograder.backends import gpu

    def refuse(arrays):
        raise RuntimeError("cuMemHostRegister is not there")

    monkeypatch.setattr(gpu, "lock_pages", refuse)
    backend = object.__new__(gpu.GpuBackend)  # no PyCUDA here: only what prepared() reads
    backend._failure = None
    backend.active = contextlib.nullcontext
    ran = []
    with backend.prepared(launch(LOCK_BYTES)):
        ran.append(True)
    assert ran == [True]
