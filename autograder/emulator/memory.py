"""The emulator's memory spaces and how an address becomes (allocation, byte offset).

Generic addresses are 64-bit: global allocation ``k`` (a kernel argument or a module
variable) lives at ``k << 40``, so every allocation is its own region with exact bounds and
an access far outside one still names it; the shared window is region 0xFE and the local
window 0xFD (``cvta`` adds or removes those bases). An access outside its allocation is
a finding: reads return NaN/garbage bytes (0xFF), writes are dropped, nothing crashes.

Shared memory: each variable gets a 256-byte red zone before it (a multiple of 128, so
banks are those of the GPU's own layout) and the block's memory starts as 0xFF garbage.
Its shadow state (``shadow.py``) is kept per 4-byte word, or per byte for a kernel that
reads or writes shared memory in pieces smaller than 4 bytes (a ``char`` or ``__half``
array written by neighbouring threads must not read as a race)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import numpy as np

from autograder.emulator.shadow import SharedShadow

REGION_SHIFT = 40
SHARED_REGION = 0xFE
LOCAL_REGION = 0xFD
_HALF = 1 << (REGION_SHIFT - 1)
RED_ZONE = 256
GARBAGE = 0xFF


def region_of(addr: np.ndarray | int):
    return (addr + _HALF) >> REGION_SHIFT


def padded(nbytes: int) -> int:
    return max(16, (nbytes + 15) // 16 * 16)


class Region:
    """One global allocation: a kernel argument or a module variable."""

    def __init__(self, name: str, data: np.ndarray, what: str):
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self.name = name
        self.what = what  # "argument", "variable"
        self.nbytes = raw.size
        self.itemsize = data.dtype.itemsize
        self.count = data.size
        self.dtype = data.dtype
        self.bytes = np.full(padded(raw.size), GARBAGE, np.uint8)
        self.bytes[: raw.size] = raw

    def contents(self) -> np.ndarray:
        return self.bytes[: self.nbytes].view(self.dtype).copy()


class GlobalMemory:
    def __init__(self):
        self.regions: list[Region | None] = [None]
        self.by_name: dict[str, int] = {}

    def add(self, region: Region) -> int:
        self.regions.append(region)
        self.by_name[region.name] = len(self.regions) - 1
        return (len(self.regions) - 1) << REGION_SHIFT

    def region(self, k: int) -> Region | None:
        return self.regions[k] if 0 < k < len(self.regions) else None


@dataclass
class SharedVar:
    name: str  # the source name, demangled
    start: int  # offset in the emulator's layout
    size: int


def source_name(mangled: str) -> str:
    """``_ZZ10window_sumE1s`` -> ``s``; ``_ZZ4gemmPKfS0_PfiiiE2As`` -> ``As``; others as is."""
    match = re.search(r"E(\d+)([A-Za-z_]\w*)$", mangled) if mangled.startswith("_ZZ") else None
    if match is None:
        return mangled
    return match.group(2)[: int(match.group(1))]


class SharedLayout:
    """Where each shared variable lives inside one block's shared memory."""

    def __init__(self, variables, dynamic_bytes: int):
        self.vars: list[SharedVar] = []
        self.offset: dict[str, int] = {}
        real = 0
        dynamic = [v for v in variables if v.extern]
        for count, v in enumerate([v for v in variables if not v.extern]):
            real = _align(real, v.align)
            self._place(v.name, real + RED_ZONE * (count + 1), v.size)
            real += v.size
        if dynamic:
            real = _align(real, max(v.align for v in dynamic))
            start = real + RED_ZONE * (len(self.vars) + 1)
            for v in dynamic:
                self.offset[v.name] = start
            self.vars.append(SharedVar(source_name(dynamic[0].name), start, dynamic_bytes))
            real += dynamic_bytes
        end = max((v.start + v.size for v in self.vars), default=0)
        self.block_bytes = _align(end + RED_ZONE, 128)
        self.starts = np.array([v.start for v in self.vars], np.int64)
        self._start_list = self.starts.tolist()

    def _place(self, name: str, start: int, size: int) -> None:
        self.offset[name] = start
        self.vars.append(SharedVar(source_name(name), start, size))

    def var_at(self, offset: int) -> SharedVar | None:
        if not self.vars:
            return None
        k = bisect.bisect_right(self._start_list, offset) - 1
        return self.vars[max(k, 0)]


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class SharedMemory:
    """Shared memory of the blocks of one chunk, with its race/initialisation shadow."""

    def __init__(self, layout: SharedLayout, n_blocks: int, unit: int = 4):
        self.layout = layout
        self.block_bytes = layout.block_bytes
        total = padded(layout.block_bytes * n_blocks)
        self.bytes = np.full(total, GARBAGE, np.uint8)
        self.unit_shift = unit.bit_length() - 1
        self.shadow = SharedShadow(total // unit, layout.block_bytes // unit)


def local_bytes(variables) -> int:
    return sum(_align(v.size, 16) for v in variables if v.space == "local")
