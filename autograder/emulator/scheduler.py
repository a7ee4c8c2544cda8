"""Minimum-PC scheduling of one chunk's lanes (``machine.py``'s docstring says why and how):
which lanes run which instruction next, until every lane has exited; barriers resolved when no
lane can run (``barriers.resolve``).

The scheduler alternates two steps. ``_next_group`` picks the lanes at the lowest PC (letting
lanes that yielded at a spin-wait have their turn, and releasing barriers, when nothing else
can run); ``_run`` runs them together, converged, from that PC on: no masks and no PC arrays
per instruction, a register-only instruction over every lane where they are all the chunk's
runnable lanes (or the others all wait to exit: ``_others_exit``), a guard every lane passes
costing a count, not a lane list, until they part (a branch some take, an exit or a barrier
some reach) or reach the lowest PC of the other runnable lanes. Their PCs are written back
only then.

The lanes' states live on the chunk (``status``, ``pc``, ``wait_pc``, ``exit_pc``: ``barriers.py``
reads and releases them); the scheduler makes them when it starts and moves lanes between them,
counting the lanes that can run and those that wait at barriers as it does (``n_run``, ``n_wait``),
so that choosing the next lanes makes no pass over ``status``."""

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

# Lanes that run together: (their PC, the lanes (None: every lane of the chunk), how many, their
# warps, dense (they are all the chunk's runnable lanes, or the others wait to exit), the lowest
# PC of the other runnable lanes)
Group = tuple[int, np.ndarray | None, int, int, bool, int]
# Lanes of a group that run an instruction: (the lanes (None: every lane), how many, their warps)
Selected = tuple[np.ndarray | None, int, int]


class Scheduler:
    """Runs every lane of ``chunk`` to its end (``run``)."""

    def __init__(self, chunk: Chunk):
        self.ch = chunk
        n = chunk.n
        chunk.status = np.zeros(n, np.int8)
        chunk.pc = np.zeros(n, np.int64)
        chunk.wait_pc = np.zeros(n, np.int64)
        chunk.exit_pc = np.full(n, -1, np.int64)  # per lane: the branch to the exit it took, or the exit
        decoded = chunk.m.decoded
        self.targets, self.leaves, self.spins = decoded.targets, decoded.leaves, decoded.spins
        self.kinds, self.program = decoded.kinds, decoded.program
        self.n_run = n  # the lanes that can run: neither waiting nor exited
        self.n_wait = 0  # the lanes waiting at a barrier (a count, not a pass over ``status``)
        self.steps = 0  # the scheduler's steps (an instruction, or a choice of lanes)
        self.cur = 0  # the instruction the last group reached

    def run(self, left: int) -> int:
        """Every lane to its end, ``left`` lane instructions at most (BudgetError past them,
        which ends the launch); returns how many are left."""
        ch = self.ch
        group: Group | None = (0, None, ch.n, ch.n_warps, True, NEVER)
        try:
            while group is not None:
                left = self._run(group, left)
                group = self._next_group()
        finally:
            ch.plan.tally_runs(ch.m.tally)
        return left

    def _run(self, group: Group, left: int) -> int:  # 67 lines: the dispatch loop, its common case inline
        """Run ``group``'s lanes together from its PC until they part or reach the other lanes'
        lowest PC; their PCs written back then. Returns the lane instructions left."""
        cur, act, act_n, act_warps, dense, stop_at = group
        ch = self.ch
        m, plan, pc = ch.m, ch.plan, ch.pc
        entries, runs = plan.entries, plan.runs
        tally_lanes, tally_warps = m.tally.lanes, m.tally.warps
        every = None if dense else act  # what a pure instruction of every lane of the group gets
        steps = self.steps
        while True:
            steps += 1
            if steps & 4095 == 0:
                m.check_time(cur)
            i = cur
            if i >= stop_at:  # the other lanes' turn, or they join these: schedule by PC
                pc[act] = i
                break
            span = runs[i]
            if span and every is None and i + span <= stop_at and left >= act_n * span:
                self._fused(i, span, act_n, act_warps)  # a run of fmas or mmas, every lane: as one
                left -= act_n * span
                steps += span - 1
                cur = i + span
                continue
            run, kind, g = entries[i] or plan.entry(i)
            if g is None and kind == PURE:  # the common case, kept short
                tally_lanes[i] += act_n
                tally_warps[i] += act_warps
                left -= act_n
                if left < 0:
                    raise m.over_budget(i)
                run(every)
                cur = i + 1
                continue
            sel, sel_n, sel_w = (
                (act, act_n, act_warps) if g is None else self._select(g(), act, act_n, act_warps)
            )
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
                if 0 < sel_n < act_n and self._skips(i, stop_at):  # the others run what the taken skip
                    self.steps = steps + 1  # as if the lanes parted and the others were chosen
                    left = self._skipped(i, g(), act, left)
                    steps = self.steps + 1  # as if they met the taken lanes and all were chosen
                    cur = self.targets[i]
                    continue
                taken = self._branch(i, sel, sel_n, act, act_n, stop_at)
                if taken is None:
                    break
                cur = taken
            else:
                rest = self._stop_some(i, kind, sel, sel_n, act, act_n)
                if rest is None:
                    break
                act, act_n, act_warps = rest
                dense = dense and kind == EXIT
                every = None if dense else act
                cur = i + 1
        self.steps, self.cur = steps, cur
        return left

    def _fused(self, i: int, span: int, act_n: int, act_warps: int) -> None:
        """Every lane runs the fmas or mmas ``i .. i + span - 1`` as one; counted for each when the
        chunk's run ends (``plan.Plan.tally_runs``)."""
        plan = self.ch.plan
        counted = plan.ran.get(i)
        if counted is None:
            counted = plan.ran[i] = [0, 0]
        counted[0] += act_n
        counted[1] += act_warps
        (plan.fused.get(i) or plan.fused_run(i, span))()

    def _select(self, passes: np.ndarray, act: np.ndarray | None, act_n: int, act_warps: int) -> Selected:
        """The lanes of ``act`` (None: every lane) that pass a guard (``passes``, per lane)."""
        if act is None:  # every lane: a count first, a lane list only if some are off
            sel_n = int(np.count_nonzero(passes))
        else:
            sel = act[passes[act]]
            sel_n = sel.size
        if sel_n == act_n:
            return act, act_n, act_warps
        if sel_n == 0:  # a guard no lane passes: nothing runs (a branch not taken)
            return NO_LANES, 0, 0
        if act is None:
            sel = np.flatnonzero(passes)
        return sel, sel_n, warp_count(self.ch.warp_of[sel])

    def _branch(
        self, i: int, sel: np.ndarray | None, sel_n: int, act: np.ndarray | None, act_n: int, stop_at: int
    ) -> int | None:
        """Lanes ``sel`` of ``act`` take branch ``i``: where ``act`` goes on together, or None
        where they part (their PCs written), or where the taken lanes yield at a spin-wait."""
        ch = self.ch
        target = self.targets[i]
        if self.leaves[i] and sel_n:
            ch.exit_pc[ch.all_lanes if sel is None else sel] = i
        if self.spins[i] and sel_n and (stop_at < BIG or sel_n < act_n):  # others run first
            ch.pc[ch.all_lanes if act is None else act] = i + 1
            ch.pc[ch.all_lanes if sel is None else sel] = target + YIELDED
            return None
        if sel_n == act_n:
            return target
        if sel_n == 0:
            return i + 1
        ch.pc[ch.all_lanes if act is None else act] = i + 1
        ch.pc[sel] = target
        return None

    def _skips(self, i: int, stop_at: int) -> bool:
        """Does branch ``i`` skip forward, before ``stop_at``, over instructions that neither
        branch nor stop (a load some lanes make, ``c ? a[i] : 0``)? Where some lanes take it, the
        others run those instructions alone (``_skipped``) and all go on together from its target,
        as they would after parting there and meeting again, without the two choices of lanes."""
        target = self.targets[i]
        if not i + 1 < target < stop_at or self.leaves[i] or self.spins[i]:
            return False
        return all(kind <= SIDE for kind in self.kinds[i + 1 : target])

    def _skipped(self, i: int, passes: np.ndarray, act: np.ndarray | None, left: int) -> int:
        """The lanes of ``act`` (None: every lane) that do not take branch ``i`` (its guard
        ``passes``) run up to its target (``_skips``); returns the lane instructions left."""
        rest = np.flatnonzero(~passes) if act is None else act[~passes[act]]
        target = self.targets[i]
        return self._run((i + 1, rest, rest.size, warp_count(self.ch.warp_of[rest]), False, target), left)

    def _stop_some(
        self, i: int, kind: int, sel: np.ndarray | None, sel_n: int, act: np.ndarray | None, act_n: int
    ) -> Selected | None:
        """Lanes ``sel`` of ``act`` exit or wait at a barrier (``kind``, instruction ``i``): the
        lanes of ``act`` that go on, or None where none does or no lane of the chunk can run."""
        ch = self.ch
        if sel_n:
            self.n_run -= ch.n if sel is None else sel.size
            self._stop(sel, i, kind)
        if self.n_run == 0 or sel_n == act_n:
            return None
        act = np.flatnonzero(ch.status == RUN) if act is None else act[ch.status[act] == RUN]
        return act, act.size, warp_count(ch.warp_of[act])

    def _next_group(self) -> Group | None:
        """The lanes at the lowest PC, to run together until they reach the next lowest; lanes
        that yielded at a spin-wait take their turn when only they can run, barriers are
        resolved when no lane can run; None once every lane has exited."""
        ch = self.ch
        pc = ch.pc
        while True:
            self.steps += 1
            if self.steps & 4095 == 0:
                ch.m.check_time(self.cur)
            low = pc.min()
            if YIELDED <= low < BIG:  # only lanes that yielded at spin-waits can run: their turn
                pc[pc < BIG] -= YIELDED
                continue
            if low >= BIG:
                if not self.n_wait:
                    ch.steps = self.steps
                    return None
                self._release()
                continue
            sel = np.flatnonzero(pc == low)
            n_run = self.n_run
            if sel.size == n_run:
                act = None if n_run == ch.n else sel
                act_warps = ch.n_warps if act is None else warp_count(ch.warp_of[act])
                return int(low), act, n_run, act_warps, not self.n_wait, NEVER
            # the lanes at the lowest PC run alone until they reach the next lowest
            stop_at = int(pc[pc != low].min())
            dense = self._others_exit(stop_at, n_run - sel.size)
            return int(low), sel, sel.size, warp_count(ch.warp_of[sel]), dense, stop_at

    def _others_exit(self, at: int, others: int) -> bool:
        """Do the ``others`` runnable lanes outside the group all wait at ``at`` to exit (an exit
        no guard holds back), no lane waiting at a barrier? Then their registers are dead and the
        group's register-only instructions run over every lane of the chunk, as where they have
        exited (the lanes out of bounds of a ragged launch wait at the kernel's exit while the
        others run its loop)."""
        ch = self.ch
        return (
            not self.n_wait
            and at < len(self.kinds)
            and self.kinds[at] == EXIT
            and self.program[at].guard is None
            and int(np.count_nonzero(ch.pc == at)) == others
        )

    def _stop(self, lanes: np.ndarray | None, i: int, kind: int) -> None:
        """Lanes ``lanes`` (None: every lane, as a slice: no index array) leave the runnable set:
        they exit, or wait at a barrier."""
        ch = self.ch
        at = slice(None) if lanes is None else lanes
        ch.pc[at] = BIG
        if kind == EXIT:
            ch.status[at] = DONE
            branched = ch.exit_pc[at]  # where a return left, not the closing brace's exit
            ch.exit_pc[at] = np.where(branched < 0, i, branched)
        else:
            ch.status[at] = WAIT
            ch.wait_pc[at] = i
            self.n_wait += ch.n if lanes is None else lanes.size

    def _release(self) -> None:
        """No lane can run and some wait at barriers: resolve every block's barrier (which
        releases lanes, or ends them), then count the lanes that can run and those still waiting."""
        resolve(self.ch)
        status = self.ch.status
        self.n_run = int(np.count_nonzero(status == RUN))
        self.n_wait = int(np.count_nonzero(status == WAIT))
