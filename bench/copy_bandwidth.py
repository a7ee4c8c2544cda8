"""How fast a GPU grading moves arrays between host and device, by the way it moves them (issue 27).

A GPU task uploads every timed case's input sets (2**26-element arrays: 256 MiB each) while it
holds the GPU alone (``gpu_timing``), and a launch copies its buffers in and out
(``GpuBackend``); both copy from pageable numpy memory, which the driver stages through pinned
buffers of its own. This measures, for one ``--mib`` array, best of ``--repeats``:

- ``heap``: ``memcpy_htod`` from an array numpy allocated (pageable);
- ``shared``: the same from an array in a shared-memory file mapped with ``MAP_POPULATE``, as a
  grading's worker receives its arrays (``backends/worker.receive``);
- ``pinned``: from page-locked memory (``pagelocked_empty``): the copy engine's own rate;
- ``registered``: the shared array page-locked in place as a grading's worker locks it
  (``backends/pinned.py``), copied, and unlocked, all three timed;
- ``copied into page-locked``: the shared array copied on the host into page-locked memory, then
  to the device (and, apart, what allocating that much page-locked memory costs);
- ``staged``: the shared array copied through two page-locked buffers of ``--stage-mib``, a host
  copy into one while the device reads the other;
- ``dtoh heap`` and ``dtoh pinned``: the way back.

Prints a table (GB/s, and ms for the array) with the device and the date.

    python3 bench/copy_bandwidth.py [--mib 256] [--repeats 5] [--stage-mib 32]
"""

from __future__ import annotations

import argparse
import datetime
import mmap
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.backends.gpu import GpuBackend  # noqa: E402
from autograder.backends.pinned import lock_pages, unlock_pages  # noqa: E402


def shared_array(nbytes: int) -> np.ndarray:
    """Random bytes in a shared-memory file, mapped as the worker maps a message's buffers."""
    fd = os.memfd_create("copy-bandwidth", os.MFD_CLOEXEC)
    os.ftruncate(fd, nbytes)
    os.pwrite(fd, np.random.default_rng(1).bytes(nbytes), 0)
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
    mapped = mmap.mmap(fd, nbytes, flags=flags)
    os.close(fd)
    return np.frombuffer(mapped, dtype=np.uint8)


def best_s(function: Callable[[], None], repeats: int, cuda) -> float:
    times = []
    for _ in range(repeats):
        cuda.Context.synchronize()
        start = time.perf_counter()
        function()
        cuda.Context.synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def staged(cuda, device, host: np.ndarray, stages: list, streams: list) -> None:
    """``host`` to ``device`` through the page-locked ``stages`` in turn."""
    size = stages[0].nbytes
    done = [None] * len(stages)
    for k, offset in enumerate(range(0, host.nbytes, size)):
        which = k % len(stages)
        if done[which] is not None:
            done[which].synchronize()
        part = host[offset : offset + size]
        stages[which][: part.nbytes] = part
        cuda.memcpy_htod_async(int(device) + offset, stages[which][: part.nbytes], streams[which])
        done[which] = cuda.Event().record(streams[which])


def registered(cuda, device, host: np.ndarray, copy: bool = True) -> None:
    """``host`` page-locked where it lies as a grading's worker locks it (``pinned.lock_pages``),
    copied, unlocked."""
    locked = lock_pages([host])
    assert locked, "the driver refused to lock the array"
    if copy:
        cuda.memcpy_htod(device, host)
    unlock_pages(locked)


def copied_in(cuda, device, host: np.ndarray, locked: np.ndarray) -> None:
    """``host`` copied on the host into page-locked memory, then to the device."""
    np.copyto(locked, host)
    cuda.memcpy_htod(device, locked)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stage-mib", type=int, default=32)
    args = parser.parse_args()
    nbytes = args.mib << 20
    backend = GpuBackend()
    cuda = backend.driver
    with backend.active():
        device = cuda.mem_alloc(nbytes)
        heap = np.random.default_rng(2).integers(0, 255, nbytes, dtype=np.uint8)
        shared = shared_array(nbytes)
        pinned = cuda.pagelocked_empty(nbytes, np.uint8)
        pinned[:] = heap
        stages = [cuda.pagelocked_empty(args.stage_mib << 20, np.uint8) for _ in range(2)]
        streams = [cuda.Stream() for _ in stages]
        back = np.empty(nbytes, np.uint8)
        ways = {
            "heap": lambda: cuda.memcpy_htod(device, heap),
            "shared": lambda: cuda.memcpy_htod(device, shared),
            "pinned": lambda: cuda.memcpy_htod(device, pinned),
            "registered": lambda: registered(cuda, device, shared),
            "registering and unregistering alone": lambda: registered(cuda, device, shared, copy=False),
            "copied into page-locked": lambda: copied_in(cuda, device, shared, pinned),
            "page-locked allocation alone": lambda: cuda.pagelocked_empty(nbytes, np.uint8),
            f"staged ({args.stage_mib} MiB x 2)": lambda: staged(cuda, device, shared, stages, streams),
            "dtoh heap": lambda: cuda.memcpy_dtoh(back, device),
            "dtoh pinned": lambda: cuda.memcpy_dtoh(pinned, device),
        }
        print(f"{backend.device_name}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
        print(f"| way ({args.mib} MiB) | ms | GB/s |\n|---|---|---|")
        for name, way in ways.items():
            seconds = best_s(way, args.repeats, cuda)
            print(f"| {name} | {1000 * seconds:.1f} | {nbytes / seconds / 1e9:.1f} |", flush=True)
        cuda.memcpy_dtoh(back, device)
        print("staged copy arrived intact:", bool(np.array_equal(back, shared)))
    backend.close()


if __name__ == "__main__":
    main()
