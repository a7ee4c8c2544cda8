"""Resolve the barriers of one chunk once no lane can run: release, diagnose, count; refuse a
barrier's thread count a GPU refuses (``_check_counts``); and hold the blocks of a cooperative
launch at a grid-wide sync until all of them arrive (:class:`GridBarrier`).

A barrier with a thread count (``bar.sync 1, 64``, ``bar.arrive 1, 64``: named barriers, as
the PTX ISA has them) completes, in each block, once that many threads have arrived at its
barrier number, counted a warp (32) at a time; more warps than that complete it once for
each count of them, in warp order (``_release_counted``); a count of 0 is the whole block.
Only the warps that took part in an instance are ordered by it: their accesses before it
stop racing with the accesses of the warps that waited at it, and no others do
(``SharedShadow.partial_barrier``). ``bar.arrive`` counts its warp without waiting for the
barrier, and its accesses after it are ordered after nothing; the emulator holds the
arriving lanes until the instance completes, a legal order on a GPU (an arriving warp may
be slow), so that nothing they do after arriving is taken to precede it. A kernel that
needs an arriving warp to go on before the barrier it arrived at completes (it arrives,
then waits at a barrier that the waiting warps reach only after the first) ends in a
deadlock here where a GPU runs it.

What ``cooperative_groups::this_grid().sync()`` compiles to (``cooperative_groups/details/
sync.h``, NVRTC 13.5, ``sm_90``): a ``trap`` unless the grid workspace's address is non-null
(``is_valid()``; the driver puts it in ``%envreg1``, high half, and ``%envreg2``, low half);
``barrier.sync 0``; thread (0,0,0) of each block adds its arrival to the workspace's barrier
word (``atom.add.release.gpu``: block (0,0,0) adds 0x80000000 - (blocks - 1), the others 1,
so the word's top bit flips when the last block arrives) and spins on ``ld.acquire.gpu``
until the bit has flipped; ``barrier.sync 0``.

The emulator runs that code as written, over a real workspace in global memory (``special.py``
reads its address; a launch that is not cooperative reads 0, as on a GPU, so ``grid.sync()``
traps: an H200 then fails with "unspecified launch failure"), and adds one rule: a grid
sync's first ``barrier.sync`` (its *arrival barrier*, the block barrier before an
``atom.add`` to an address computed from ``%envreg1``/``%envreg2``) holds its block until
every block of the launch waits at one. A cooperative launch is one chunk (``machine.py``),
so when no lane can run every block waits at a barrier or is done: the held blocks are then
released together, their threads (0,0,0) add to the barrier word in one instruction, and the
spin loop sees the flip on its first pass. Why not the spin alone: minimum-PC scheduling runs
the lowest PC first, so a block spinning while another has yet to arrive (at a higher PC, or
never) would spin until the instruction budget. Why not a rewrite of the whole sequence into
one barrier: that would depend on the header's exact code; this depends on two facts (the
workspace comes from the environment registers, a grid sync begins with a block barrier),
and the protocol's traffic (one atomic and one load a block) is counted as a GPU counts it.
Blocks waiting at different grid syncs pass each other, as on an H200 (measured: one
barrier word serves the launch); they are released one call site at a time, the word set
(``_preset``) so that it flips when that site's blocks have added theirs: only this relies
on the header's arithmetic. The split form (``barrier_arrive``, ``barrier_wait``) is held
at its arrival: stricter than a GPU, never wrong unless blocks wait on each other between
the two.

When held blocks can never be released: a block that exited, or whose thread (0,0,0)
exited (it signals the block's arrival), while others wait at a grid sync is
``barrier_divergence``, and the waiting blocks end (an H200 hangs there); threads of one
block waiting at a grid sync and at another barrier are a ``deadlock``, as two different
named barriers are."""

from __future__ import annotations

import numpy as np

from autograder.contract import Finding, LaunchFailure, LaunchTimeout
from autograder.emulator.isa import BIG, DONE, RUN, WAIT, Addr, Imm, Reg, Sreg
from autograder.emulator.limits import (
    BARRIERS,
    MAX_BLOCK_THREADS,
    barrier_operands,
    immediate,
    is_block_barrier,
)
from autograder.emulator.memory import Region
from autograder.feedback import counted

WORKSPACE_REGISTERS = ("%envreg1", "%envreg2")  # the grid workspace's address, high and low halves
WORKSPACE = "the grid workspace"  # how findings name its region
WORKSPACE_SIZE = 16  # its first word, as an H200's driver (580) fills it; the barrier word starts at 0
FLIP = 0x80000000  # the barrier word's top bit
GRID_SYNC = "grid.sync()"
BLOCK_SYNC = "__syncthreads()"


class GridBarrier:
    """A cooperative launch's grid sync: the workspace (``wsSize``, then the barrier word, as
    ``cooperative_groups/details/driver_abi.h`` lays it out) and the arrival barriers."""

    def __init__(self, machine):
        region = Region(WORKSPACE, np.array([WORKSPACE_SIZE, 0], np.uint32), "workspace")
        self.workspace = machine.memory.add(region)
        self.word = region.bytes[4:8].view(np.uint32)  # the barrier word
        self.arrivals = grid_sync_arrivals(machine.program, machine.barrier_ids)
        self.ids = machine.barrier_ids.copy()  # each arrival barrier a barrier of its own
        self.ids[self.arrivals] = BARRIERS + np.arange(len(self.arrivals))
        self.is_arrival = np.zeros(len(self.ids), bool)
        self.is_arrival[self.arrivals] = True
        self.passed = np.zeros(machine.n_blocks, bool)  # arrived at a complete grid sync, not released

    def hold(self, chunk, waits: np.ndarray, low: np.ndarray) -> np.ndarray:
        """The blocks (of ``waits``, waiting at ``low``) that stay at their arrival barrier:
        all of them while another block is on its way; none once every block is there (one
        call site at a time where they wait at different ones). A grid sync that can never
        complete ends its blocks' threads, with the finding."""
        at_grid = waits & self.is_arrival[np.minimum(low, len(self.ids) - 1)]
        if not self.passed.any():
            if not at_grid.any() or (waits & ~at_grid).any():
                return at_grid
            signalled = chunk.status[:: chunk.bs] == WAIT  # thread (0,0,0) of each block waits
            absent = np.flatnonzero(~(at_grid & signalled))
            if absent.size:
                _report_absent(chunk, at_grid, int(absent[0]), low)
                chunk.status[np.repeat(at_grid, chunk.bs) & (chunk.status == WAIT)] = DONE
                return at_grid
            if np.unique(low[at_grid]).size == 1:
                return np.zeros_like(at_grid)  # the protocol runs as written
            self.passed = at_grid.copy()
        go = self.passed & (low == low[self.passed].min())
        self.passed &= ~go
        self._preset(go)
        return at_grid & ~go

    def _preset(self, go: np.ndarray) -> None:
        """Set the barrier word so that it flips when the last block of ``go`` adds its
        arrival, as if the others had added theirs (sync.h: block (0,0,0) adds 0x80000000 -
        (blocks - 1), every other block 1); it ends at 0x80000000, as a GPU's does."""
        adds = np.where(np.arange(go.size) == 0, FLIP - (go.size - 1), 1)
        self.word[0] = (FLIP - int(adds[go].sum())) % (1 << 32)


def grid_sync_arrivals(program, barrier_ids: np.ndarray) -> list[int]:
    """The arrival barrier of each grid sync of ``program``: the block barrier before an
    ``atom.add`` whose address derives from the workspace registers."""
    derived = _workspace_registers(program)
    arrivals = []
    for k, ins in enumerate(program):
        if ins.op == "atom" and "add" in ins.mods and _derives(ins.operands[1], derived):
            before = (j for j in range(k - 1, -1, -1) if barrier_ids[j] >= 0 and is_block_barrier(program[j]))
            arrival = next(before, None)
            if arrival is not None and arrival not in arrivals:
                arrivals.append(arrival)
    return arrivals


def _workspace_registers(program) -> set[str]:
    """The registers whose values derive from ``%envreg1``/``%envreg2``."""
    derived: set[str] = set()
    grew = True
    while grew:
        grew = False
        for ins in program:
            dest = ins.operands[0] if ins.operands else None
            fresh = type(dest) is Reg and dest.name not in derived
            if fresh and any(_derives(o, derived) for o in ins.operands[1:]):
                derived.add(dest.name)
                grew = True
    return derived


def _derives(operand, derived: set[str]) -> bool:
    if type(operand) is Addr:
        operand = operand.base
    if type(operand) is Sreg:
        return operand.name in WORKSPACE_REGISTERS
    return type(operand) is Reg and operand.name in derived


def uncooperative_sync(machine, failure: LaunchFailure) -> LaunchFailure | None:
    """The trap of a grid sync in a launch that is not cooperative, explained (or None)."""
    if machine.launch.cooperative:
        return None
    lines = {machine.program[k].line for k in grid_sync_arrivals(machine.program, machine.barrier_ids)}
    if not any(str(failure).startswith(f"{machine.log.where(line)}: ") for line in lines):
        return None
    return LaunchFailure(
        f"{failure}: {GRID_SYNC} needs a cooperative launch (cudaLaunchCooperativeKernel); "
        "launched with <<<...>>>, the grid has no workspace, this_grid().is_valid() is false and "
        f"{GRID_SYNC} traps"
    )


def resolve(chunk) -> None:
    m = chunk.m
    grid = m.grid_barrier
    if m.counted and _release_counted(chunk):
        return
    if grid is None and _all_at_one_barrier(chunk):
        return
    shape = (chunk.n_blocks, chunk.bs)
    status = chunk.status.reshape(shape)
    waiting = status == WAIT
    has_wait = waiting.any(axis=1)
    wait_pc = chunk.wait_pc.reshape(shape)
    low = np.where(waiting, wait_pc, BIG).min(axis=1)
    high = np.where(waiting, wait_pc, -1).max(axis=1)
    exited = (status == DONE).any(axis=1) & has_wait
    mixed = has_wait & (low != high)
    ids = m.barrier_ids if grid is None else grid.ids
    stuck = mixed & (ids[np.minimum(low, len(ids) - 1)] != ids[np.maximum(high, 0)])
    if exited.any():
        _report_exited(chunk, np.flatnonzero(exited & ~stuck), waiting)
    if (mixed & ~stuck).any():
        _report_mixed(chunk, np.flatnonzero(mixed & ~stuck), waiting, "barrier_divergence")
    if stuck.any():
        _report_mixed(chunk, np.flatnonzero(stuck), waiting, "deadlock")
        dead = (waiting & stuck[:, None]).reshape(-1)
        chunk.status[dead] = DONE
    held = np.zeros_like(has_wait) if grid is None else grid.hold(chunk, has_wait & ~stuck, low)
    released = (chunk.status == WAIT) & ~held[chunk.lane_slot]
    lanes = np.flatnonzero(released)
    if m.counted:
        _check_counts(chunk, lanes)
    _reduce(chunk, lanes)
    chunk.status[lanes] = RUN
    chunk.pc[lanes] = chunk.wait_pc[lanes] + 1
    blocks = np.flatnonzero(has_wait & ~stuck & ~held)
    for pc, count in zip(*np.unique(low[blocks], return_counts=True), strict=False):
        m.tally.add(int(pc), "barriers", int(count))
    chunk.shared.shadow.barrier()  # blocks without waiting threads have all exited


def is_arrival(ins) -> bool:
    """``bar.arrive``/``barrier.arrive`` (a CTA's barrier, not a cluster's)."""
    return ins.op in ("bar", "barrier") and "arrive" in ins.mods and "cluster" not in ins.mods


def _release_counted(chunk) -> bool:
    """Release every complete instance of a barrier with a thread count (see the module's
    docstring); False where none is."""
    m = chunk.m
    lanes = np.flatnonzero(chunk.status == WAIT)
    lanes = lanes[np.isin(chunk.wait_pc[lanes], m.counted)]
    if lanes.size == 0:
        return False
    counts = _counts(chunk, lanes)
    ids = m.barrier_ids[chunk.wait_pc[lanes]]
    warps = chunk.lane_tid[lanes] // 32
    released = False
    for slot, number in {(int(s), int(b)) for s, b in zip(chunk.lane_slot[lanes], ids, strict=True)}:
        here = (chunk.lane_slot[lanes] == slot) & (ids == number)
        arrived = np.unique(warps[here])
        size = int(counts[here][0]) // 32 or chunk.warps_per_block
        for first in range(0, arrived.size - size + 1, size):
            instance = here & np.isin(warps, arrived[first : first + size])
            _complete(chunk, slot, lanes[instance])
            released = True
    return released


def _complete(chunk, slot: int, lanes: np.ndarray) -> None:
    """One instance of a counted barrier completes in block slot ``slot``: ``lanes`` (all
    its threads that wait or arrived) go on, their warps ordered (``partial_barrier``)."""
    m = chunk.m
    at = chunk.wait_pc[lanes]
    waits = ~np.array([is_arrival(m.program[pc]) for pc in at.tolist()])
    warp_bits = np.left_shift(1, chunk.lane_tid[lanes] // 32)
    took_part = int(np.bitwise_or.reduce(warp_bits))
    waited = int(np.bitwise_or.reduce(warp_bits[waits], initial=0))
    chunk.shared.shadow.partial_barrier(slot, took_part, waited)
    _reduce(chunk, lanes)
    chunk.status[lanes] = RUN
    chunk.pc[lanes] = at + 1
    for pc in np.unique(at).tolist():
        m.tally.add(pc, "barriers", 1)


def _counts(chunk, lanes: np.ndarray) -> np.ndarray:
    """The thread count of the barrier each of ``lanes`` waits at (``_refuse`` refuses a
    count a GPU refuses)."""
    counts = np.zeros(lanes.size, np.int64)
    at = chunk.wait_pc[lanes]
    for pc in np.unique(at).tolist():
        here = at == pc
        ins = chunk.m.program[pc]
        count = barrier_operands(ins)[1]
        if isinstance(count, Imm):
            counts[here] = immediate(count)
        else:
            counts[here] = chunk.registers.reg(count.name)[lanes[here]].astype(np.int64) & 0xFFFFFFFF
        _refuse(chunk, ins, lanes[here], counts[here])
    return counts


def _all_at_one_barrier(chunk) -> bool:
    """The common case, released with no reports: every lane of the chunk waits (none
    exited) at one barrier. What ``resolve`` does then, without its per-block analysis."""
    pcs = chunk.wait_pc
    at = int(pcs[0])
    if chunk.status.max() != WAIT or not (pcs == at).all():
        return False
    m = chunk.m
    if m.counted:
        _check_counts(chunk, chunk.all_lanes)
    _reduce(chunk, chunk.all_lanes)
    chunk.status[:] = RUN
    chunk.pc[:] = at + 1
    m.tally.add(at, "barriers", chunk.n_blocks)
    chunk.shared.shadow.barrier()
    return True


def _reduce(chunk, lanes: np.ndarray) -> None:
    """``bar.red`` (``__syncthreads_count/and/or``): each block's predicate reduced, for all."""
    program = chunk.m.program
    if not chunk.m.reductions:
        return
    at = chunk.wait_pc[lanes]
    for pc in chunk.m.reductions:
        ins = program[pc]
        here = lanes[at == pc]
        if here.size == 0:
            continue
        pred = ins.operands[-1]
        values = chunk.registers.reg(pred.name)[here].astype(bool) ^ pred.negate
        slot = chunk.lane_slot[here]
        yes = np.bincount(slot, weights=values, minlength=chunk.n_blocks)[slot]
        everyone = np.bincount(slot, minlength=chunk.n_blocks)[slot]
        dst = chunk.registers.reg(ins.operands[0].name)
        if "popc" in ins.mods:
            dst[here] = yes.astype(dst.dtype)
        else:
            dst[here] = (yes == everyone) if "and" in ins.mods else (yes > 0)


def _check_counts(chunk, lanes: np.ndarray) -> None:
    """Refuse the thread counts a GPU refuses of the counted barriers ``lanes`` wait at."""
    _counts(chunk, lanes[np.isin(chunk.wait_pc[lanes], chunk.m.counted)])


def _refuse(chunk, ins, lanes: np.ndarray, counts: np.ndarray) -> None:
    """A barrier's thread count, as an H200 takes it (measured with a 64-thread block):
    one that is not a multiple of 32, or over 1024, is an illegal instruction, which aborts
    the kernel; one over the block's threads (its warps' 32 each) waits for threads that
    never come, and the kernel hangs."""
    where = chunk.m.log.where(ins.line)
    illegal = np.flatnonzero((counts % 32 != 0) | (counts > MAX_BLOCK_THREADS))
    if illegal.size:
        lane, count = int(lanes[illegal[0]]), int(counts[illegal[0]])
        raise LaunchFailure(
            f"{where}: {chunk.who(lane)} reached a barrier for {counted(count, 'thread')}; the count must "
            f"be a multiple of the warp size (32) and at most {MAX_BLOCK_THREADS}, else the GPU "
            "executes an illegal instruction, which aborts the whole kernel"
        )
    threads = chunk.warps_per_block * 32
    over = np.flatnonzero(counts > threads)
    if over.size:
        lane, count = int(lanes[over[0]]), int(counts[over[0]])
        raise LaunchTimeout(
            f"{where}: {chunk.who(lane)} waits at a barrier for {count} threads, but its block "
            f"has only {chunk.bs}: the barrier never completes, and on a GPU the kernel hangs "
            "until it is killed"
        )


def barrier_id(ins) -> int:
    if ins.op not in ("bar", "barrier") or not ins.operands:
        return -1
    first = ins.operands[0]
    return int(first.text, 0) if isinstance(first, Imm) else -1


def _lane(chunk, block: int, mask_row: np.ndarray) -> int:
    return block * chunk.bs + int(np.flatnonzero(mask_row)[0])


def _report_exited(chunk, blocks: np.ndarray, waiting: np.ndarray) -> None:
    if blocks.size == 0:
        return
    m = chunk.m
    status = chunk.status.reshape(waiting.shape)
    b = int(blocks[0])
    lane = _lane(chunk, b, waiting[b])
    gone = status[b] == DONE
    exit_line = m.program[int(chunk.exit_pc[_lane(chunk, b, gone)])].line  # the return, or the if
    line = m.program[int(chunk.wait_pc[lane])].line
    left = f" at line {exit_line}" if exit_line else ""
    message = (
        f"{m.log.where(line)}: {chunk.who(lane)} waits at the barrier on line {line} while "
        f"{counted(int(gone.sum()), 'thread')} of its block already exited{left}"
        f"; every thread of a block must reach each {_calls(chunk, int(chunk.wait_pc[lane]))}: put "
        "the guard around the work, not around the barrier"
    )
    tid, block = chunk.thread(lane)
    threads = int(waiting[blocks].sum())
    m.log.add(Finding("barrier_divergence", message, line=line, thread=tid, block=block), threads)


def _report_mixed(chunk, blocks: np.ndarray, waiting: np.ndarray, kind: str) -> None:
    m = chunk.m
    b = int(blocks[0])
    pcs = chunk.wait_pc.reshape(waiting.shape)[b]
    first = _lane(chunk, b, waiting[b] & (pcs == pcs[waiting[b]].min()))
    second = _lane(chunk, b, waiting[b] & (pcs == pcs[waiting[b]].max()))
    line1 = m.program[int(chunk.wait_pc[first])].line
    line2 = m.program[int(chunk.wait_pc[second])].line
    what = "can never meet" if kind == "deadlock" else "wait at different barriers"
    calls = _calls(chunk, int(chunk.wait_pc[first]), int(chunk.wait_pc[second]))
    message = (
        f"{m.log.where(line1)}: threads of one block {what}: {chunk.who(first)} at line {line1} "
        f"and {chunk.who(second)} at line {line2}; every thread of a block must reach the same "
        f"{calls}"
    )
    tid, block = chunk.thread(first)
    threads = int(waiting[blocks].sum())
    m.log.add(Finding(kind, message, line=line1, thread=tid, block=block), threads)


def _calls(chunk, *pcs: int) -> str:
    """What the student wrote for the barriers at ``pcs``: __syncthreads(), grid.sync()."""
    grid = chunk.m.grid_barrier
    names = {GRID_SYNC if grid is not None and grid.is_arrival[pc] else BLOCK_SYNC for pc in pcs}
    return " or ".join(sorted(names))


def _report_absent(chunk, at_grid: np.ndarray, absent: int, low: np.ndarray) -> None:
    """Blocks wait at a grid sync that block ``absent`` never reaches."""
    m = chunk.m
    waiter = int(np.flatnonzero(at_grid)[0]) * chunk.bs
    waiter += int(np.flatnonzero(chunk.status[waiter : waiter + chunk.bs] == WAIT)[0])
    line = m.program[int(low[waiter // chunk.bs])].line
    signal = absent * chunk.bs  # thread (0,0,0): it adds the block's arrival
    exit_pc = int(chunk.exit_pc[signal])
    left = (
        f" (it exited at line {m.program[exit_pc].line})" if exit_pc >= 0 and m.program[exit_pc].line else ""
    )
    message = (
        f"{m.log.where(line)}: {chunk.who(waiter)} waits at the {GRID_SYNC} on line {line}, which "
        f"{chunk.who(signal)} never reaches{left}; every block of a cooperative launch, and "
        f"thread (0,0,0) of each, must reach each {GRID_SYNC}, else on a GPU the waiting blocks "
        "hang until the kernel is killed"
    )
    tid, block = chunk.thread(waiter)
    hung = at_grid & (chunk.status[:: chunk.bs] == WAIT)  # a block without its thread (0,0,0): reported
    threads = int(np.count_nonzero(chunk.status[np.repeat(hung, chunk.bs)] == WAIT))
    m.log.add(Finding("barrier_divergence", message, line=line, thread=tid, block=block), threads)
