"""Resolve the barriers of one chunk once no lane can run: release, diagnose, count; and
refuse a barrier's thread count a GPU refuses (``_check_counts``)."""

from __future__ import annotations

import numpy as np

from autograder.backends.base import Finding, LaunchFailure, LaunchTimeout
from autograder.emulator.isa import BIG, DONE, RUN, WAIT, Imm
from autograder.emulator.limits import MAX_BLOCK_THREADS, barrier_operands, immediate
from autograder.feedback import counted


def resolve(chunk) -> None:
    m = chunk.m
    shape = (chunk.n_blocks, chunk.bs)
    status = chunk.status.reshape(shape)
    waiting = status == WAIT
    has_wait = waiting.any(axis=1)
    wait_pc = chunk.wait_pc.reshape(shape)
    low = np.where(waiting, wait_pc, BIG).min(axis=1)
    high = np.where(waiting, wait_pc, -1).max(axis=1)
    exited = (status == DONE).any(axis=1) & has_wait
    mixed = has_wait & (low != high)
    ids = m.barrier_ids
    stuck = mixed & (ids[np.minimum(low, len(ids) - 1)] != ids[np.maximum(high, 0)])
    if exited.any():
        _report_exited(chunk, np.flatnonzero(exited & ~stuck), waiting)
    if (mixed & ~stuck).any():
        _report_mixed(chunk, np.flatnonzero(mixed & ~stuck), waiting, "barrier_divergence")
    if stuck.any():
        _report_mixed(chunk, np.flatnonzero(stuck), waiting, "deadlock")
        dead = (waiting & stuck[:, None]).reshape(-1)
        chunk.status[dead] = DONE
    released = chunk.status == WAIT
    lanes = np.flatnonzero(released)
    if m.counted:
        _check_counts(chunk, lanes)
    _reduce(chunk, lanes)
    chunk.status[lanes] = RUN
    chunk.pc[lanes] = chunk.wait_pc[lanes] + 1
    blocks = np.flatnonzero(has_wait & ~stuck)
    for pc, count in zip(*np.unique(low[blocks], return_counts=True), strict=False):
        m.tally.add(int(pc), "barriers", int(count))
    chunk.shared.shadow.barrier()  # blocks without waiting threads have all exited


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
        values = chunk.reg(pred.name)[here].astype(bool) ^ pred.negate
        slot = chunk.lane_slot[here]
        yes = np.bincount(slot, weights=values, minlength=chunk.n_blocks)[slot]
        everyone = np.bincount(slot, minlength=chunk.n_blocks)[slot]
        dst = chunk.reg(ins.operands[0].name)
        if "popc" in ins.mods:
            dst[here] = yes.astype(dst.dtype)
        else:
            dst[here] = (yes == everyone) if "and" in ins.mods else (yes > 0)


def _check_counts(chunk, lanes: np.ndarray) -> None:
    """A barrier's thread count, as an H200 takes it (measured with a 64-thread block):
    one that is not a multiple of 32, or over 1024, is an illegal instruction, which aborts
    the kernel; one over the block's threads (its warps' 32 each) waits for threads that
    never come, and the kernel hangs."""
    at = chunk.wait_pc[lanes]
    for pc in chunk.m.counted:
        here = lanes[at == pc]
        if here.size:
            ins = chunk.m.program[pc]
            count = barrier_operands(ins)[1]
            if isinstance(count, Imm):
                values = np.full(here.size, immediate(count), np.int64)
            else:
                values = chunk.reg(count.name)[here].astype(np.int64) & 0xFFFFFFFF
            _refuse(chunk, ins, here, values)


def _refuse(chunk, ins, lanes: np.ndarray, counts: np.ndarray) -> None:
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
        "; every thread of a block must reach each __syncthreads(): put the guard around the "
        "work, not around the barrier"
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
    message = (
        f"{m.log.where(line1)}: threads of one block {what}: {chunk.who(first)} at line {line1} "
        f"and {chunk.who(second)} at line {line2}; every thread of a block must reach the same "
        "__syncthreads()"
    )
    tid, block = chunk.thread(first)
    threads = int(waiting[blocks].sum())
    m.log.add(Finding(kind, message, line=line1, thread=tid, block=block), threads)
