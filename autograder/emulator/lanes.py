"""Which thread of which block each lane of a chunk is, and its warp.

A chunk runs ``n_blocks`` whole blocks of ``bs`` threads as ``n = n_blocks * bs`` lanes, block
by block: lane ``l`` is thread ``l % bs`` of the chunk's block slot ``l // bs``, and its warp is
the ``(l % bs) // 32``-th of that block (a partial last warp where ``bs`` is no multiple of 32).
All of it depends on the chunk's shape alone, so a chunk kept for the next launch of its shape
keeps it; which blocks of the grid the slots are (``place``) is each launch's."""

from __future__ import annotations

import math

import numpy as np

from autograder.emulator.findings import dim3, fmt3

Dim3 = tuple[int, int, int]


class Lanes:
    """The lanes of ``n_blocks`` blocks of shape ``block``: per lane its block slot
    (``lane_slot``), its thread's linear index (``lane_tid``, and as int32: ``tid32``) and its
    warp in the chunk (``warp_of``); ``block_linear``: each slot's block in the grid."""

    def __init__(self, n_blocks: int, block: Dim3):
        self.block = block
        self.bs = bs = math.prod(block)
        self.n_blocks = n_blocks
        self.n = n = n_blocks * bs
        self.lane_slot: np.ndarray = np.repeat(np.arange(n_blocks, dtype=np.int64), bs)
        self.lane_tid: np.ndarray = np.tile(np.arange(bs, dtype=np.int64), n_blocks)
        self.tid32: np.ndarray = self.lane_tid.astype(np.int32)
        self.warps_per_block = (bs + 31) // 32
        self.warp_of: np.ndarray = self.lane_slot * self.warps_per_block + self.lane_tid // 32
        self.n_warps = n_blocks * self.warps_per_block
        self.full_warps = bs % 32 == 0
        self.all_lanes: np.ndarray = np.arange(n, dtype=np.int64)
        self.grid: Dim3 = (1, 1, 1)
        self.block_linear: np.ndarray = np.zeros(n_blocks, np.int64)

    def place(self, first: int, grid: Dim3) -> None:
        """The slots are blocks ``first .. first + n_blocks - 1`` of a grid of shape ``grid``."""
        self.grid = grid
        self.block_linear = first + np.arange(self.n_blocks, dtype=np.int64)

    def thread(self, lane: int) -> tuple[Dim3, Dim3]:
        """Lane ``lane``'s thread index and block index."""
        tid = dim3(int(self.lane_tid[lane]), self.block)
        block = dim3(int(self.block_linear[self.lane_slot[lane]]), self.grid)
        return tid, block

    def who(self, lane: int) -> str:
        tid, block = self.thread(lane)
        return f"thread {fmt3(tid)} of block {fmt3(block)}"
