"""Which host arrays a GPU call page-locks, and over which pages (``backends/pinned.py``)."""

import threading
from multiprocessing.connection import Pipe

import numpy as np

from autograder.backends.pinned import (
    LOCK_BYTES,
    empty_in_own_pages,
    large_arrays,
    owns_its_pages,
    page_ranges,
)
from autograder.backends.worker import receive, send
from autograder.contract import Buffer, Launch, Program, Scalar, TimingRequest

PAGE = 4096


def launch(*sizes: int) -> Launch:
    args = (
        *(Buffer(f"x{k}", empty_in_own_pages((n,), np.uint8)) for k, n in enumerate(sizes)),
        Scalar("n", 1),
    )
    return Launch(Program("", "k.cu", "k"), (1, 1, 1), (1, 1, 1), args)


def test_only_arrays_of_a_lock_worth_are_locked_from_launches_and_timing_requests():
    small, large = LOCK_BYTES - 1, LOCK_BYTES
    assert [a.nbytes for a in large_arrays(launch(small, large))] == [large]
    request = TimingRequest((launch(large), launch(small, large)), Program("", "k.cu", "k"), {}, 0.0, 0.0)
    assert [a.nbytes for a in large_arrays(request)] == [large, large]
    strided = Launch(
        Program("", "k.cu", "k"),
        (1, 1, 1),
        (1, 1, 1),
        (Buffer("x", empty_in_own_pages((2 * large,), np.uint8)[::2]),),
    )
    assert large_arrays(strided) == []  # its bytes do not lie in one range


def test_only_arrays_that_own_their_pages_are_locked():
    """An array on numpy's heap shares its first and last pages with other memory: locking them
    made a later copy into a neighbour fail on the H200 (pinned.py). Arrays at the start of pages
    mapped for them are locked, a page-aligned view of one too; a view starting inside a page not."""
    owned = empty_in_own_pages((2 * LOCK_BYTES,), np.uint8)
    heap = np.zeros(LOCK_BYTES, np.uint8)
    assert owns_its_pages(owned) and owns_its_pages(owned[PAGE:]) and not owns_its_pages(owned[1:])
    assert not owns_its_pages(heap)
    arrays = large_arrays(launch(LOCK_BYTES)) + large_arrays(
        Launch(Program("", "k.cu", "k"), (1, 1, 1), (1, 1, 1), (Buffer("h", heap), Buffer("o", owned[1:])))
    )
    assert [a.nbytes for a in arrays] == [LOCK_BYTES]


def test_a_messages_large_arrays_own_their_pages_as_the_worker_receives_them():
    """Through the worker's messages: an array of random bytes travels in the shared file, a
    poisoned output as its one value, filled again (``worker._filled``); both arrive owning
    their pages, and the launch's arrays of a lock's worth are all locked."""
    sent = launch(LOCK_BYTES, LOCK_BYTES)
    random = np.random.default_rng(0).integers(0, 255, LOCK_BYTES, np.uint8)
    poisoned = np.full(LOCK_BYTES // 4, np.nan, np.float32)
    sent = Launch(
        sent.program, sent.grid, sent.block, (Buffer("r", random), Buffer("p", poisoned, is_output=True))
    )
    left, right = Pipe()
    try:
        sender = threading.Thread(target=send, args=(left, sent))
        sender.start()
        received = receive(right)
        sender.join()
    finally:
        left.close()
        right.close()
    assert all(owns_its_pages(b.data) for b in received.args)
    assert [a.nbytes for a in large_arrays(received)] == [LOCK_BYTES, LOCK_BYTES]
    assert received.args[1].data.tobytes() == poisoned.tobytes()


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
