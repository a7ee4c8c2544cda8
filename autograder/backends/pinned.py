"""A call's large host arrays page-locked where they lie, for the length of the call.

The driver copies pageable memory through staging buffers of its own: on the H200's host 8.7 GB/s
for a 768 MiB input set, against 55 GB/s from page-locked memory (``bench/copy_bandwidth.py``,
``bench/results/batch-gpu.md``). A GPU task uploads every timed case's input sets while it holds
the GPU alone (``gpu_timing``), and a launch copies its buffers in and out, so those copies were
a fifth of the GPU's time in a batch. Page-locking the arrays in place (``cuMemHostRegister``,
35 ms for 768 MiB, registering and unregistering) is host work: a grading's worker does it
before it asks for the GPU (``worker.serve``, ``Backend.prepared``), and the copies under the
lock then run at the copy engine's rate.

The driver is called through cuda-bindings: PyCUDA's ``register_host_memory`` fails under numpy 2
(it sets its result's base twice). It is only a speed-up: a range the driver refuses (memory it
cannot lock, a range already locked) is copied as before, and nothing here changes a copy's
bytes.

Only arrays that own the pages they lie in are locked (:func:`owns_its_pages`): a message's
buffers, each padded to whole pages of the worker's shared file (``worker._offsets``), and the
outputs the worker fills again (``worker._filled``), made in pages of their own
(:func:`empty_in_own_pages`). An array on numpy's heap shares its first and last pages with other
memory; locking them made a later copy into a neighbour that straddled the locked range fail
("cuMemcpyDtoH failed: invalid argument": in a GPU grading of several assignments, the first
launch of matmul_register_tile after matmul_naive's timings, H200, 2026-12-03), which the grading
blamed on the kernel. Ranges that share a page are merged into one.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable

import numpy as np

from autograder.contract import Buffer, Launch, TimingRequest

LOCK_BYTES = 16 << 20  # smaller arrays copy in about a millisecond pageable: not worth a lock


def large_arrays(argument) -> list[np.ndarray]:
    """The host arrays of a launch or a timing request worth locking: contiguous ones (what the
    copies read; another is copied into a contiguous one first) of ``LOCK_BYTES`` or more, that
    own their pages."""
    launches = argument.student if isinstance(argument, TimingRequest) else (argument,)
    buffers = [a for launch in launches if isinstance(launch, Launch) for a in launch.args]
    return [
        b.data
        for b in buffers
        if isinstance(b, Buffer)
        and b.data.nbytes >= LOCK_BYTES
        and b.data.flags.c_contiguous
        and owns_its_pages(b.data)
    ]


def owns_its_pages(array: np.ndarray, page: int = mmap.PAGESIZE) -> bool:
    """Whether ``array`` starts on a page boundary of memory mapped for it (an ``mmap`` at the
    root of its bases), so that the whole pages it touches hold nothing of anyone else's."""
    root = array.base
    while isinstance(root, np.ndarray):
        root = root.base
    if isinstance(root, memoryview):
        root = root.obj
    return isinstance(root, mmap.mmap) and array.__array_interface__["data"][0] % page == 0


def empty_in_own_pages(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised array at the start of an anonymous mapping of whole pages of its own."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    pages = mmap.mmap(-1, max(-(-count * dtype.itemsize // mmap.PAGESIZE), 1) * mmap.PAGESIZE)
    return np.frombuffer(pages, dtype, count).reshape(shape)


def page_ranges(arrays: Iterable[np.ndarray], page: int = mmap.PAGESIZE) -> list[tuple[int, int]]:
    """(start, length) of the whole pages the arrays' bytes lie in, overlapping ranges merged."""
    spans = sorted(
        (start // page * page, -(-(start + a.nbytes) // page) * page)
        for a in arrays
        if a.nbytes
        for start in [a.__array_interface__["data"][0]]
    )
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end - start) for start, end in merged]


def lock_pages(arrays: Iterable[np.ndarray]) -> list[tuple[int, int]]:
    """Lock the pages of ``arrays`` for every CUDA context (one must be current); the ranges
    locked, to give to :func:`unlock_pages` while the arrays still live."""
    from cuda.bindings import driver

    locked = []
    for start, length in page_ranges(arrays):
        (error,) = driver.cuMemHostRegister(start, length, driver.CU_MEMHOSTREGISTER_PORTABLE)
        if error == driver.CUresult.CUDA_SUCCESS:
            locked.append((start, length))
    return locked


def unlock_pages(locked: list[tuple[int, int]]) -> None:
    from cuda.bindings import driver

    for start, _length in locked:
        driver.cuMemHostUnregister(start)
