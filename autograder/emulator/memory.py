"""The emulator's memory spaces and how an address becomes (allocation, byte offset).

Global allocations (kernel arguments, module variables) lie where an H200's ``cudaMalloc``
puts them: in the 0x7f.. range of a 47-bit address space (``HEAP``; the H200 gave
0x7fd2f7e00000), each at an address of its own, aligned to 512 bytes (``ALIGN``), drawn at
random for every launch from the operating system's entropy (``Draws``: nothing a student can
seed or predict). Every address of the range belongs to the allocation nearest to it
(``GlobalMemory.owners``: the range is cut halfway between neighbours), so an access far
outside one still names it, with exact bounds; an address outside the range lies in no
allocation. The shared window is region 0xFE and the local window 0xFD of 1 TiB regions
(``window_of``; ``cvta`` adds or removes those bases). An access outside its allocation is a
finding: reads return NaN/garbage bytes (0xFF), writes are dropped, nothing crashes.

Allocations lie ``MIN_GAP`` (4 GiB) apart at least, and ``b - a`` differs from launch to
launch: a pointer derived from ``a`` by a constant offset lands outside ``a``'s bytes (a
finding) and reaches ``b`` only by a guess that hits with probability about 4e-9 a launch
(a 4000-byte ``b`` in 1 TiB), instead of as it would in a fixed layout. Only a kernel that
takes both pointers can compute ``b - a``, and ``a + (b - a)`` then is ``b`` on any GPU as
well (its accesses are counted and bounds-checked as ``b``'s); nothing else a kernel can
read depends on where another buffer lies.

Shared memory: a block's first variable lies at offset 1024 of the shared window, as on an
H200, which keeps the first 1 KiB of each block's shared memory for the system
(``FIRST_SHARED``; the reserved region of ``special.reserved_shared`` lies there, short of a
red zone); every later variable gets a 256-byte red zone before it (a multiple of 128, so
banks, and alignments up to 256, are those of the GPU's own layout) and the block's memory
starts as 0xFF garbage. Its shadow state (``shadow.py``) is kept per 4-byte word, or per
byte for a kernel that reads or writes shared memory in pieces smaller than 4 bytes (a
``char`` or ``__half`` array written by neighbouring threads must not read as a race)."""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from autograder.contract import UNDEFINED_BYTE
from autograder.device import DEVICES
from autograder.emulator.shadow import SharedShadow

REGION_SHIFT = 40  # the windows' regions: 1 TiB each
SHARED_REGION = 0xFE
LOCAL_REGION = 0xFD
_HALF = 1 << (REGION_SHIFT - 1)
HEAP = (0x7F << 40, 0x80 << 40)  # where global allocations lie, as cudaMalloc's on an H200
ALIGN = 512  # cudaMalloc's granularity: every allocation starts at a multiple
MIN_GAP = 1 << 32  # between two allocations, at least (less for a launch of very many)
POOL_BYTES = 64  # entropy read at a time (Draws): eight draws
NEAR_NULL = 1 << 40  # an address this close to 0: a null or uninitialised pointer
RED_ZONE = 256
FIRST_SHARED = DEVICES["sm_90"].reserved_shared  # 1024: the H200 keeps the bytes below per block
RESERVED_REGION = "the block's reserved shared memory"  # below FIRST_SHARED; how findings name it
GARBAGE = UNDEFINED_BYTE  # the GPU backend's canary byte too: a read past an array agrees
SMALL_REGION = 1 << 16  # bytes: an allocation up to this is copied through bytes (Region)
_TAIL = bytes([GARBAGE]) * 16  # what padded adds, at most


SPACES = ("global", "shared", "local", "const", "param")  # the state spaces an instruction names


def window_of(addr: np.ndarray | int):
    """The 1 TiB region of a generic address (``SHARED_REGION``, ``LOCAL_REGION``: a window)."""
    return (addr + _HALF) >> REGION_SHIFT


def by_window(
    idx: np.ndarray | None, a: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, str]]:
    """Generic addresses ``a`` of lanes ``idx`` (None: every lane) split by the space they lie
    in: (their positions in ``a``, their lanes, their addresses in the space, the space)."""
    k = window_of(a)
    for kk, space in ((SHARED_REGION, "shared"), (LOCAL_REGION, "local"), (None, "global")):
        here = (k != SHARED_REGION) & (k != LOCAL_REGION) if kk is None else k == kk
        sub = np.flatnonzero(here)
        if sub.size:
            base = 0 if kk is None else kk << REGION_SHIFT
            yield sub, (sub if idx is None else idx[sub]), a[sub] - base, space


def padded(nbytes: int) -> int:
    return max(16, (nbytes + 15) // 16 * 16)


class Region:
    """One global allocation: a kernel argument or a module variable; ``space`` is
    ``"const"`` for a ``__constant__`` variable (readable by ``ld.const``, never written)."""

    def __init__(self, name: str, data: np.ndarray, what: str, space: str = "global"):
        self.name = name
        self.what = what  # "argument", "variable"
        self.space = space
        self.nbytes = data.nbytes
        self.itemsize = data.dtype.itemsize
        self.count = data.size
        self.dtype = data.dtype
        self.bytes = _garbage_padded(data)

    def contents(self) -> np.ndarray:
        return self.bytes[: self.nbytes].view(self.dtype).copy()


def _garbage_padded(data: np.ndarray) -> np.ndarray:
    """A copy of ``data``'s bytes (C order) then ``GARBAGE`` to its ``padded`` size: a small
    array's through ``bytes`` (two numpy calls, not five: most of placing a small launch's
    arguments), a large one's in place (one copy)."""
    size = data.nbytes
    if size <= SMALL_REGION:
        return np.frombuffer(bytearray(data.tobytes() + _TAIL[: padded(size) - size]), np.uint8)
    padded_bytes = np.full(padded(size), GARBAGE, np.uint8)
    padded_bytes[:size] = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return padded_bytes


class GlobalMemory:
    """The launch's global allocations, each at a random address (see the module's
    docstring); ``regions`` and ``by_name`` number them in the order they were added,
    ``placed`` in the order of their addresses, ``starts`` holds those addresses and
    ``edges()`` where each one's part of ``HEAP`` begins (and, last, where the heap ends)."""

    def __init__(self):
        self.regions: list[Region | None] = [None]
        self.by_name: dict[str, int] = {}
        self.placed: list[Region] = []
        self.starts: list[int] = []
        self._edges: list[int] | None = None  # worked out when first asked for (edges)
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._draws = Draws()  # the launch's own

    def add(self, region: Region) -> int:
        """Place ``region`` and return its address."""
        self.regions.append(region)
        self.by_name[region.name] = len(self.regions) - 1
        start = self._free_start(len(region.bytes))
        k = bisect.bisect(self.starts, start)
        self.starts.insert(k, start)
        self.placed.insert(k, region)
        self._edges = self._arrays = None
        return start

    def edges(self) -> list[int]:
        """Where each allocation's part of ``HEAP`` begins (halfway from its neighbour), in the
        order of their addresses, and last where the heap ends."""
        if self._edges is None:
            halfway = [(self._end(j) + self.starts[j + 1]) // 2 for j in range(len(self.starts) - 1)]
            self._edges = [HEAP[0], *halfway, HEAP[1]]
        return self._edges

    def _end(self, k: int) -> int:
        return self.starts[k] + len(self.placed[k].bytes)

    def _free_start(self, size: int) -> int:
        """A random start, ``ALIGN``-aligned, whose allocation leaves the gap to the heap's
        ends and to every other allocation (the gap narrows with the allocations' count)."""
        gap = min(MIN_GAP, (HEAP[1] - HEAP[0]) // (16 * (len(self.placed) + 1)))
        low, high = HEAP[0] + gap, HEAP[1] - gap - size
        while True:
            start = low + self._draws.below((high - low) // ALIGN) * ALIGN
            k = bisect.bisect(self.starts, start)
            clear_before = k == 0 or self._end(k - 1) + gap <= start
            clear_after = k == len(self.starts) or start + size + gap <= self.starts[k]
            if clear_before and clear_after:
                return start

    def find(self, addr: int) -> tuple[Region | None, int]:
        """The allocation whose part of the heap holds ``addr``, and its start (None, 0: none)."""
        k = bisect.bisect(self.edges(), addr) - 1
        if 0 <= k < len(self.placed):
            return self.placed[k], self.starts[k]
        return None, 0

    def owners(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per address: the index in ``placed`` of the allocation whose part of the heap holds
        it (-1: none), and its offset from that allocation's start (the address: none)."""
        if self._arrays is None:
            self._arrays = np.array(self.edges(), np.int64), np.array([*self.starts, 0], np.int64)
        edges, starts = self._arrays
        k = np.searchsorted(edges, a, side="right") - 1
        k[k >= len(self.placed)] = -1
        return k, a - starts[k]


class Draws:
    """Uniform draws below a bound from the operating system's entropy, as ``secrets.randbelow``
    draws them (a word's top bits, drawn again while they reach the bound), but read
    ``POOL_BYTES`` at a time: one ``os.urandom`` call places a launch's allocations, not one each
    (2 µs a draw). Each launch has its own (``GlobalMemory``): nothing drawn is left for the next."""

    def __init__(self):
        self._pool = b""
        self._used = 0

    def below(self, bound: int) -> int:
        if not 0 < bound <= 1 << 64:
            raise ValueError(f"cannot draw below {bound}")
        shift = 64 - (bound - 1).bit_length()
        while True:
            if self._used == len(self._pool):
                self._pool, self._used = os.urandom(POOL_BYTES), 0
            word = int.from_bytes(self._pool[self._used : self._used + 8], "little") >> shift
            self._used += 8
            if word < bound:
                return word


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
        for v in variables:
            if v.name == RESERVED_REGION:
                self._place(v.name, 0, v.size)
        own = [v for v in variables if not v.extern and v.name != RESERVED_REGION]
        real = 0  # the kernel's own variables as an H200 lays them, from FIRST_SHARED
        for count, v in enumerate(own):
            real = _align(real, v.align)
            self._place(v.name, FIRST_SHARED + real + RED_ZONE * count, v.size)
            real += v.size
        dynamic = [v for v in variables if v.extern]
        if dynamic:
            start = FIRST_SHARED + _align(real, max(v.align for v in dynamic)) + RED_ZONE * len(own)
            for v in dynamic:
                self.offset[v.name] = start
            self.vars.append(SharedVar(source_name(dynamic[0].name), start, dynamic_bytes))
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
