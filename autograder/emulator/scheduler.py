"""Minimum-PC scheduling of one chunk's lanes (see ``machine.py``'s docstring): which lanes run
which instruction next, until every lane has exited; barriers resolved when no lane can run
(``barriers.resolve``).

The lanes' states live on the chunk (``status``, ``pc``, ``wait_pc``, ``exit_pc``: ``barriers.py``
reads and releases them); the scheduler makes them when it starts and moves lanes between them."""

from __future__ import annotations

import numpy as np

from autograder.emulator.barriers import resolve
from autograder.emulator.chunk import Chunk
from autograder.emulator.counters import warp_count
from autograder.emulator.isa import BIG, BRA, DONE, EXIT, PURE, RUN, SIDE, WAIT

NEVER = 1 << 62  # no lane outside the converged ones can run before them
NO_LANES: np.ndarray = np.empty(0, np.int64)
NO_LANES.setflags(write=False)
YIELDED = 1 << 32  # added to the PC of lanes yielding at a spin-wait (below BIG: they can run)


class Scheduler:
    """Runs every lane of ``chunk`` to its end."""

    def __init__(self, chunk: Chunk):
        self.ch = chunk

    def run(self, left: int) -> int:
        """Every lane to its end, ``left`` lane instructions at most; returns how many are left."""
        try:
            return self._schedule(left)
        finally:
            self.ch.plan.tally_runs(self.ch.m.tally)

    def _schedule(self, left: int) -> int:
        """Run every lane to its end, ``left`` lane instructions at most (BudgetError past
        them, which ends the launch); returns how many are left."""
        ch = self.ch
        m = ch.m
        plan = ch.plan.entries
        bind, fuse = ch.plan.entry, ch.plan.fused_run
        targets, leaves, spins = m.decoded.targets, m.decoded.leaves, m.decoded.spins
        runs, fused = ch.plan.runs, ch.plan.fused
        ran = ch.plan.ran
        tally_lanes, tally_warps = m.tally.lanes, m.tally.warps
        warp_of = ch.warp_of
        n = ch.n
        status: np.ndarray = np.zeros(n, np.int8)
        pc: np.ndarray = np.zeros(n, np.int64)
        ch.status, ch.pc = status, pc
        ch.wait_pc = np.zeros(n, np.int64)
        ch.exit_pc = np.full(n, -1, np.int64)  # per lane: the branch to the exit it took, or the exit
        n_run = n
        converged, cur = True, 0
        act, act_n, act_warps, dense = None, n, ch.n_warps, True
        every = None  # what a pure instruction of every active lane gets: None (all lanes) or act
        stop_at = NEVER  # the lowest PC of the runnable lanes outside act
        steps = 0
        while True:
            steps += 1
            if steps & 4095 == 0:
                m.check_time(cur)
            if converged:
                i = cur
                if i >= stop_at:  # the other lanes' turn, or they join these: schedule by PC
                    pc[act] = i
                    converged = False
                    continue
                span = runs[i]
                if span and every is None and i + span <= stop_at and left >= act_n * span:
                    counted = ran.get(i)  # a run of fmas, every lane: as one instruction
                    if counted is None:
                        counted = ran[i] = [0, 0]
                    counted[0] += act_n
                    counted[1] += act_warps
                    left -= act_n * span
                    steps += span - 1
                    (fused.get(i) or fuse(i, span))()
                    cur = i + span
                    continue
                run, kind, g = plan[i] or bind(i)
                if g is None and kind == PURE:  # the common case, kept short
                    tally_lanes[i] += act_n
                    tally_warps[i] += act_warps
                    left -= act_n
                    if left < 0:
                        raise m.over_budget(i)
                    run(every)
                    cur = i + 1
                    continue
                if g is None:
                    sel, sel_n, sel_w = act, act_n, act_warps
                else:
                    gv = g()
                    if act is None:  # every lane: a count first, a lane list only if some are off
                        sel_n = int(np.count_nonzero(gv))
                    else:
                        sel = act[gv[act]]
                        sel_n = sel.size
                    if sel_n == act_n:
                        sel, sel_w = act, act_warps
                    elif sel_n == 0:  # a guard no lane passes: nothing runs (a branch not taken)
                        sel, sel_w = NO_LANES, 0
                    else:
                        sel = np.flatnonzero(gv) if act is None else sel
                        sel_w = warp_count(warp_of[sel])
                tally_lanes[i] += sel_n
                tally_warps[i] += sel_w
                left -= sel_n
                if left < 0:
                    raise m.over_budget(i)
                if kind == PURE:
                    if sel_n:
                        run(None if (sel is act and dense) else sel)
                    cur = i + 1
                elif kind == SIDE:
                    if sel_n:
                        ch.steps = steps  # what a clock read (special.py) counts
                        run(sel)
                    cur = i + 1
                elif kind == BRA:
                    target = targets[i]
                    if leaves[i] and sel_n:
                        ch.exit_pc[ch.all_lanes if sel is None else sel] = i
                    if spins[i] and sel_n and (stop_at < BIG or sel_n < act_n):  # others run first
                        pc[ch.all_lanes if act is None else act] = i + 1
                        pc[ch.all_lanes if sel is None else sel] = target + YIELDED
                        converged = False
                    elif sel_n == act_n:
                        cur = target
                    elif sel_n == 0:
                        cur = i + 1
                    else:
                        pc[ch.all_lanes if act is None else act] = i + 1
                        pc[sel] = target
                        converged = False
                else:
                    if sel_n:
                        lanes = ch.all_lanes if sel is None else sel
                        n_run -= lanes.size
                        self._stop(lanes, i, kind)
                    if n_run == 0 or sel_n == act_n:
                        converged = False
                        continue
                    act = np.flatnonzero(status == RUN) if act is None else act[status[act] == RUN]
                    act_n = act.size
                    act_warps = warp_count(warp_of[act])
                    dense = dense and kind == EXIT
                    every = None if dense else act
                    cur = i + 1
                continue
            low = pc.min()
            if YIELDED <= low < BIG:  # only lanes that yielded at spin-waits can run: their turn
                pc[pc < BIG] -= YIELDED
                continue
            if low >= BIG:
                if not (status == WAIT).any():
                    ch.steps = steps
                    return left
                n_run = self._release()
                continue
            sel = np.flatnonzero(pc == low)
            converged, cur = True, int(low)
            if sel.size == n_run:
                act = None if n_run == n else sel
                act_n = n_run
                act_warps = ch.n_warps if act is None else warp_count(warp_of[act])
                dense = not (status == WAIT).any()
                stop_at = NEVER
            else:  # the lanes at the lowest PC run alone until they reach the next lowest
                act, act_n, act_warps, dense = sel, sel.size, warp_count(warp_of[sel]), False
                stop_at = int(pc[pc != low].min())
            every = None if dense else act

    def _stop(self, lanes: np.ndarray, i: int, kind: int) -> None:
        """Lanes leave the runnable set: they exit, or wait at a barrier."""
        ch = self.ch
        ch.pc[lanes] = BIG
        if kind == EXIT:
            ch.status[lanes] = DONE
            branched = ch.exit_pc[lanes]  # where a return left, not the closing brace's exit
            ch.exit_pc[lanes] = np.where(branched < 0, i, branched)
        else:
            ch.status[lanes] = WAIT
            ch.wait_pc[lanes] = i

    def _release(self) -> int:
        """No lane can run and some wait at barriers: resolve every block's barrier."""
        resolve(self.ch)
        return int(np.count_nonzero(self.ch.status == RUN))
