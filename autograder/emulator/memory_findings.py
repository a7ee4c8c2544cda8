"""What a memory instruction reports: an access out of bounds, at an address in no allocation,
through a state space that does not reach it, misaligned, through the parameter space; a race
or a read of uninitialised shared memory (``shadow.py`` finds them).

Each finding names the first lane it found (``Lanes.who``), its array and element where it has
one, and counts the lanes (``FindingLog.add``): findings collapse per kind, line and array."""

from __future__ import annotations

from typing import SupportsInt

import numpy as np

from autograder.contract import Finding
from autograder.emulator.findings import dim3, fmt3
from autograder.emulator.isa import Instr
from autograder.emulator.memory import NEAR_NULL, Region
from autograder.emulator.shadow import MANY, Hazard
from autograder.feedback import counted

_VERBS = {"read": "read", "write": "wrote", "atomic": "atomically updated"}


class AccessFindings:
    """The findings of instruction ``ins`` on ``chunk`` (a ``chunk.Chunk``: the launch it runs
    now, ``chunk.m``, logs them); ``const``: the instruction reads through the constant space."""

    def __init__(self, ins: Instr, chunk, const: bool):
        self.ins = ins
        self.ch = chunk
        self.const = const

    def _lane(self, idx: np.ndarray | None, pos: SupportsInt) -> int:
        return int(pos) if idx is None else int(idx[pos])

    def out_of_bounds(
        self, idx: np.ndarray | None, bad: np.ndarray, index: np.ndarray, bound: int, array: str, write: bool
    ) -> None:
        """Lanes ``bad`` reached elements ``index`` of ``array``, which has ``bound``."""
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        first = int(index[0])
        verb = "wrote" if write else "read"
        where = "past its end" if first >= bound else "before its start"
        message = (
            f"{ch.m.log.where(ins.line)}: {ch.who(lane)} {verb} {array}[{first}] {where} "
            f"({array} has {counted(bound, 'element')})"
        )
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        name = None if array.startswith(("a local", "shared memory")) else array
        ch.m.log.add(Finding(kind, message, ins.line, tid, block, name or array, first, bound), int(bad.size))

    def unknown(self, idx: np.ndarray | None, a: np.ndarray, bad: np.ndarray, write: bool) -> None:
        """Lanes ``bad`` reached addresses ``a`` that lie in no allocation."""
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        verb = "wrote" if write else "read"
        address = int(a[bad[0]])
        if abs(address) < NEAR_NULL:
            what = f"address {address:#x}, which is inside no buffer (a null or uninitialised pointer?)"
        else:  # where a wild pointer points differs from launch to launch: not in the message
            what = (
                "an address inside no buffer (buffers lie at random addresses, new on every "
                "launch, at least 4 GiB apart)"
            )
        message = f"{ch.m.log.where(ins.line)}: {ch.who(lane)} {verb} {what}"
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        ch.m.log.add(Finding(kind, message, ins.line, tid, block), int(bad.size))

    def wrong_space(
        self, idx: np.ndarray | None, bad: np.ndarray, off: np.ndarray, region: Region, write: bool
    ) -> None:
        """Lanes ``bad`` reached ``region`` through a state space that does not reach it."""
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        index = int(off[bad[0]]) // region.itemsize
        element = f"{region.name}[{index}]"
        if not self.const:
            why = f"wrote the __constant__ variable {element}, which kernels may only read"
        elif write:
            why = f"wrote {element} through the constant state space, which kernels cannot write"
        else:
            why = (
                f"read {element} through the constant state space (ld.const from a pointer to "
                f"{region.name}): a GPU reads its constant bank at that address, not {region.name}"
            )
        message = f"{ch.m.log.where(ins.line)}: {ch.who(lane)} {why}"
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        finding = Finding(kind, message, ins.line, tid, block, region.name, index, region.count)
        ch.m.log.add(finding, int(bad.size))

    def parameter_access(self, idx: np.ndarray | None, a: np.ndarray, write: bool) -> None:
        """``ld.param``/``st.param`` through a pointer: the parameter space holds the
        kernel's arguments at addresses no pointer value names, so every lane's access is
        out of bounds (a GPU reads its parameter bank there, whatever the pointer points to)."""
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, 0)
        verb = "wrote" if write else "read"
        message = (
            f"{ch.m.log.where(ins.line)}: {ch.who(lane)} {verb} through the parameter state space "
            f"({ins.op}.param from a pointer): that space holds only the kernel's arguments, so a "
            "GPU does not reach the memory the pointer points to"
        )
        tid, block = ch.thread(lane)
        kind = "out_of_bounds_write" if write else "out_of_bounds_read"
        ch.m.log.add(Finding(kind, message, ins.line, tid, block, "the parameter space"), int(a.size))

    def misaligned(
        self,
        idx: np.ndarray | None,
        a: np.ndarray,
        bad: np.ndarray,
        total: int,
        array: str,
        offsets: bool = False,
    ) -> None:
        """``a``: the lanes' addresses in their space, or their byte offsets in ``array``
        (global buffers: where a buffer lies changes from launch to launch)."""
        if bad.size == 0:
            return
        ins, ch = self.ins, self.ch
        lane = self._lane(idx, bad[0])
        at = f"byte {int(a[bad[0]])} of {array}" if offsets else f"{int(a[bad[0]]):#x}"
        message = (
            f"{ch.m.log.where(ins.line)}: {ch.who(lane)} accessed {array} at an address not "
            f"aligned to the {total}-byte access ({at})"
        )
        tid, block = ch.thread(lane)
        ch.m.log.add(Finding("misaligned_access", message, ins.line, tid, block, array), int(bad.size))

    def hazard(self, h: Hazard) -> None:
        """A race or a read of uninitialised shared memory the shadow found (``shadow.Hazard``)."""
        ins, ch = self.ins, self.ch
        m = ch.m
        unit = 1 << ch.shared.unit_shift
        slot, word = divmod(h.word, ch.shared.block_bytes // unit)
        var = ch.shared.layout.var_at(word * unit)
        name = var.name if var else "shared memory"
        index = (word * unit - var.start) // unit if var else word
        bound = var.size // unit if var else None
        as_units = "as 4-byte words" if unit == 4 else "as bytes"
        tid = dim3(h.thread, m.block)
        block = dim3(int(ch.block_linear[slot]), m.grid)
        who = f"thread {fmt3(tid)} of block {fmt3(block)}"
        where = m.log.where(ins.line)
        if h.other_pc is None:
            message = (
                f"{where}: {who} read {name}[{index}] ({as_units}) that no thread "
                "of its block wrote: shared memory starts as garbage"
            )
        else:
            other_line = m.program[h.other_pc].line
            other = "several other threads" if h.other == MANY else f"thread {fmt3(dim3(h.other, m.block))}"
            mine, theirs = h.what.split("-after-")
            message = (
                f"{where}: {who} {_VERBS[mine]} {name}[{index}] ({as_units}), which {other} "
                f"{_VERBS[theirs]} at {m.log.line(other_line)} with no barrier between ({h.what} race)"
            )
            if "atomic" in h.what:
                message += "; an atomic does not order a plain access to its word: put a barrier between them"
        m.log.add(Finding(h.kind, message, ins.line, tid, block, name, index, bound), h.count)
