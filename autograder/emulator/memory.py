"""The emulator's memory spaces and how an address becomes (allocation, byte offset).

Generic addresses are 64-bit: every global allocation (a kernel argument or a module
variable) lives at ``slot << 40`` for a slot of its own, so it is its own region with exact
bounds and an access far outside one still names it; the shared window is region 0xFE and
the local window 0xFD (``cvta`` adds or removes those bases). An access outside its
allocation is a finding: reads return NaN/garbage bytes (0xFF), writes are dropped, nothing
crashes.

Slots are drawn at random for every launch (``secrets``: nothing a student can seed or
predict) among 2**22, so two buffers are at least 1 TiB apart and ``b - a`` differs from
launch to launch: a pointer derived from ``a`` by a constant offset lands in no allocation,
which is a finding, instead of reaching ``b`` as it would in a fixed layout. Only a kernel
that takes both pointers can compute ``b - a``, and ``a + (b - a)`` then is ``b`` on any
GPU as well (its accesses are counted and bounds-checked as ``b``'s); nothing else a
kernel can read depends on where another buffer lies.

Shared memory: each variable gets a 256-byte red zone before it (a multiple of 128, so
banks are those of the GPU's own layout) and the block's memory starts as 0xFF garbage.
Its shadow state (``shadow.py``) is kept per 4-byte word, or per byte for a kernel that
reads or writes shared memory in pieces smaller than 4 bytes (a ``char`` or ``__half``
array written by neighbouring threads must not read as a race)."""

from __future__ import annotations

import bisect
import re
import secrets
from dataclasses import dataclass

import numpy as np

from autograder.emulator.shadow import SharedShadow

REGION_SHIFT = 40
SHARED_REGION = 0xFE
LOCAL_REGION = 0xFD
SLOTS = 1 << 22  # global allocations' slots: addresses below 2**62, gaps of 1 TiB at least
FIRST_SLOT = 0x100  # slots below: the null pointer's neighbourhood and the two windows
_HALF = 1 << (REGION_SHIFT - 1)
RED_ZONE = 256
GARBAGE = 0xFF


def region_of(addr: np.ndarray | int):
    return (addr + _HALF) >> REGION_SHIFT


def padded(nbytes: int) -> int:
    return max(16, (nbytes + 15) // 16 * 16)


class Region:
    """One global allocation: a kernel argument or a module variable; ``space`` is
    ``"const"`` for a ``__constant__`` variable (readable by ``ld.const``, never written)."""

    def __init__(self, name: str, data: np.ndarray, what: str, space: str = "global"):
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self.name = name
        self.what = what  # "argument", "variable"
        self.space = space
        self.nbytes = raw.size
        self.itemsize = data.dtype.itemsize
        self.count = data.size
        self.dtype = data.dtype
        self.bytes = np.full(padded(raw.size), GARBAGE, np.uint8)
        self.bytes[: raw.size] = raw

    def contents(self) -> np.ndarray:
        return self.bytes[: self.nbytes].view(self.dtype).copy()


class GlobalMemory:
    """The launch's global allocations, each at a random slot (see the module's docstring);
    ``regions`` and ``by_name`` number them in the order they were added."""

    def __init__(self):
        self.regions: list[Region | None] = [None]
        self.by_name: dict[str, int] = {}
        self.by_slot: dict[int, Region] = {}

    def add(self, region: Region) -> int:
        """Place ``region`` and return its address."""
        self.regions.append(region)
        self.by_name[region.name] = len(self.regions) - 1
        slot = self._free_slot()
        self.by_slot[slot] = region
        return slot << REGION_SHIFT

    def _free_slot(self) -> int:
        """A random slot above the null pointer's and the windows' (below ``FIRST_SLOT``)."""
        while True:
            slot = FIRST_SLOT + secrets.randbelow(SLOTS - FIRST_SLOT)
            if slot not in self.by_slot:
                return slot

    def region(self, k: int) -> Region | None:
        return self.by_slot.get(k)


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
