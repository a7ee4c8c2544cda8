"""The scheduler's shortcuts against its plain paths: each kernel here, on ragged shapes,
reports the same outputs, findings and counters with a shortcut and without it, and the shortcut
is seen to be taken. A clock reads the scheduler's step count here, not a random skew over it:
a shortcut must count the steps it saves.

- Register-only instructions of a group of lanes run over the whole chunk where every other
  runnable lane waits at an unguarded exit and none at a barrier (``Scheduler._others_exit``):
  the lanes past the end of a ragged launch wait at the kernel's exit while the others run its
  loop. Without it, every such group runs on its own lanes.
- A branch some lanes take forward over instructions that neither branch nor stop (a load some
  lanes skip) is run by the others alone, all going on together from its target
  (``Scheduler._skips``). Without it, the lanes part at the branch and meet at the target.
- Every lane of the chunk exiting or reaching a barrier together is written through a slice, not
  an array of every lane (``Scheduler._stop``); the lanes that wait at barriers and those that can
  run are counted as they stop and after barriers are resolved, not looked for in ``status``
  (``Scheduler.n_wait``, ``n_run``)."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace

import numpy as np

from autograder.contract import Buffer, Scalar
from autograder.emulator import scheduler, special
from autograder.emulator.isa import BAR, BIG, EXIT, PURE, RUN, WAIT, Reg
from autograder.emulator.machine import decoded_kernel

from .helpers import launch, out

LOOP = r"""
// The lanes past the end return at once; the others run their own number of trips, some
// returning from inside the loop, some storing after it.
extern "C" __global__ void loop(const float* x, const int* n, float* y, int* c, int size) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= size) return;
    float a = x[t];
    int k = t;
    for (int i = 0; i < n[t]; ++i) {
        a = fmaf(a, 0.75f, 0.5f);
        k = k * 3 + i;
        if (a > 1.0f) k ^= 5;
        if (k % 7 == 3) {
            c[t] = -k;
            return;
        }
    }
    y[t] = a;
    c[t] = k;
}
"""

SHARED = r"""
// The lanes past the end return before a barrier the others wait at (a finding), then the
// others read a neighbour's value and run a loop.
extern "C" __global__ void shared(const float* x, const int* n, float* y, int* c, int size) {
    __shared__ float s[256];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= size) return;
    s[threadIdx.x] = x[t];
    __syncthreads();
    float a = s[(threadIdx.x + 1) % blockDim.x];
    int k = t;
    for (int i = 0; i < n[t]; ++i) {
        a = a * 0.5f + 1.0f;
        k += i * t;
    }
    y[t] = a;
    c[t] = k;
}
"""

SKIP = r"""
// Loads some lanes skip (c ? x[i] : 0 branches around the load), one reaching past the end of
// x for some lanes (a finding), and a clock read after them.
extern "C" __global__ void skip(const float* x, const int* n, float* y, int* c, int size) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    long long start = clock64();
    float a = 0.0f;
    for (int i = 0; i < n[t % 32]; ++i) {
        a += t + i < size ? x[t + i] : 0.0f;
        a *= (t ^ i) % 3 ? x[(t * 7 + i) % size] : 0.5f;
    }
    float past = t % 5 != 1 ? x[t + 2] : 1.0f;
    y[t] = a + past;
    c[t] = (int)(clock64() - start);
}
"""

JUMP = r"""
// Some lanes jump to mid, then some of the others skip past it: lanes wait inside the code
// that the branch skips, so the others must stop there and not run on to its target.
extern "C" __global__ void jump(const float* x, const int* n, float* y, int* c, int size) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[t];
    int k = n[t];
    if (t % 4 == 0) goto mid;
    if (k > 4) goto end;
    a = a * x[(t + k) % size] + x[(t * 3) % size];
    k += (int)x[(t + 5) % size];
mid:
    a += x[(t + 1) % size];
    k *= (int)x[(t * 5) % size];
end:
    y[t] = a;
    c[t] = k;
}
"""

BARRIERS = r"""
// Every lane of the chunk reaches the first barriers together and counts a predicate at one; each
// block then runs its own number of trips over two barriers; the lanes past the end return after.
extern "C" __global__ void barriers(const float* x, const int* n, float* y, int* c, int size) {
    __shared__ float s[256];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = x[t];
    __syncthreads();
    int k = __syncthreads_count(s[(threadIdx.x + 1) % blockDim.x] > 0.0f);
    for (int i = 0; i < n[blockIdx.x]; ++i) {
        float v = s[(threadIdx.x + i) % blockDim.x];
        __syncthreads();
        s[threadIdx.x] += v;
        __syncthreads();
    }
    if (t >= size) return;
    y[t] = s[threadIdx.x];
    c[t] = k;
}
"""

SHAPES = [(3, 96, 250), (2, 100, 150), (1, 256, 77), (4, 64, 256)]  # grid, block, size


def _report(source: str, kernel: str, grid: int, block: int, size: int) -> str:
    rng = np.random.default_rng(grid * 1000 + size)
    total = grid * block
    args = [
        Buffer("x", rng.standard_normal(total).astype(np.float32)),
        Buffer("n", rng.integers(0, 9, total).astype(np.int32)),
        out("y", total),
        out("c", total, np.int32),
        Scalar("size", size),
    ]
    result = launch(source, kernel, grid, block, args)
    outputs = {name: array.tobytes().hex() for name, array in sorted(result.outputs.items())}
    findings = [(f.kind, f.message, f.line) for f in result.findings]
    counters = [result.counters.totals, sorted(result.counters.by_line.items())]
    return json.dumps([outputs, findings, counters], default=str)


def _steps(chunk, idx) -> np.ndarray:
    """A clock that reads the scheduler's step count."""
    return np.full(chunk.n if idx is None else idx.size, chunk.steps, np.uint64)


def _compare(monkeypatch, shortcut: str, cases: list[tuple[str, str]]) -> None:
    """Each of ``cases``' (source, kernel) reports on every shape with ``Scheduler.<shortcut>``
    and with it never taken."""
    taken = []
    method = getattr(scheduler.Scheduler, shortcut)

    def recorded(self, *args):
        found = method(self, *args)
        taken.append(found)
        return found

    def reports() -> list[str]:
        decoded_kernel.cache_clear()
        return [_report(source, kernel, *shape) for source, kernel in cases for shape in SHAPES]

    monkeypatch.setattr(special, "_cycles", _steps)
    monkeypatch.setattr(scheduler.Scheduler, shortcut, recorded)
    fast = reports()
    monkeypatch.setattr(scheduler.Scheduler, shortcut, lambda self, *args: False)
    plain = reports()
    decoded_kernel.cache_clear()
    launches = [(kernel, shape) for _source, kernel in cases for shape in SHAPES]
    differ = [launch for launch, a, b in zip(launches, fast, plain, strict=True) if a != b]
    assert not differ, f"launches differ: {differ}"
    assert any(taken), f"{shortcut} was never taken: the comparison proves nothing"


def test_groups_beside_lanes_waiting_to_exit_report_as_on_their_own_lanes(monkeypatch):
    _compare(monkeypatch, "_others_exit", [(LOOP, "loop"), (SHARED, "shared")])


def test_lanes_running_what_others_skip_report_as_after_parting(monkeypatch):
    _compare(monkeypatch, "_skips", [(SKIP, "skip"), (JUMP, "jump")])


def _scheduler(pcs: list[int], waiting: int = 0, guarded: bool = False) -> scheduler.Scheduler:
    """A scheduler of lanes at ``pcs`` (and ``waiting`` lanes at a barrier) in a program of
    four instructions: two register-only ones, an exit (``guarded``: behind a predicate), and
    one after it."""
    kinds = [PURE, PURE, EXIT, PURE]
    program = [SimpleNamespace(guard=None) for _ in kinds]
    program[2].guard = Reg("%p1") if guarded else None
    status = [RUN] * len(pcs) + [WAIT] * waiting
    chunk = SimpleNamespace(pc=np.array(pcs + [BIG] * waiting), status=np.array(status, np.int8))
    made = object.__new__(scheduler.Scheduler)
    made.ch, made.kinds, made.program = chunk, kinds, program
    made.n_wait = waiting  # what the scheduler counts as lanes stop at barriers (Scheduler._stop)
    return made


def test_the_others_wait_to_exit_only_where_every_one_is_at_an_exit_no_guard_holds_back():
    assert _scheduler([0, 0, 2, 2])._others_exit(2, 2)
    assert not _scheduler([0, 0, 2, 3])._others_exit(2, 2), "a lane past the exit reads its registers"
    assert not _scheduler([0, 0, 2, 2], waiting=1)._others_exit(2, 2), "a lane at a barrier reads them"
    assert not _scheduler([0, 0, 2, 2], guarded=True)._others_exit(2, 2), "a guard may hold lanes back"
    assert not _scheduler([0, 0, 1, 1])._others_exit(1, 2), "not an exit"
    assert not _scheduler([0, 0, 2, 2])._others_exit(scheduler.YIELDED + 1, 2), (
        "lanes yielding at a spin-wait"
    )


ALL_KERNELS = [(LOOP, "loop"), (SHARED, "shared"), (SKIP, "skip"), (JUMP, "jump"), (BARRIERS, "barriers")]


def _reports() -> list[str]:
    decoded_kernel.cache_clear()
    return [_report(source, kernel, *shape) for source, kernel in ALL_KERNELS for shape in SHAPES]


def test_the_lanes_counted_waiting_and_running_are_those_in_status(monkeypatch):
    next_group, checked = scheduler.Scheduler._next_group, Counter()

    def counted(self):
        status = self.ch.status
        assert self.n_wait == np.count_nonzero(status == WAIT)
        assert self.n_run == np.count_nonzero(status == RUN)
        checked["waiting" if self.n_wait else "none waiting"] += 1
        return next_group(self)

    monkeypatch.setattr(scheduler.Scheduler, "_next_group", counted)
    _reports()
    decoded_kernel.cache_clear()
    assert checked["waiting"] and checked["none waiting"], checked


def test_every_lane_stopping_through_a_slice_reports_as_through_every_lanes_index(monkeypatch):
    stop, every = scheduler.Scheduler._stop, Counter()

    def recorded(self, lanes, i, kind):
        every[kind] += lanes is None
        stop(self, lanes, i, kind)

    monkeypatch.setattr(special, "_cycles", _steps)
    monkeypatch.setattr(scheduler.Scheduler, "_stop", recorded)
    fast = _reports()
    monkeypatch.setattr(
        scheduler.Scheduler,
        "_stop",
        lambda self, lanes, i, kind: stop(self, self.ch.all_lanes if lanes is None else lanes, i, kind),
    )
    plain = _reports()
    decoded_kernel.cache_clear()
    assert fast == plain
    assert every[EXIT] and every[BAR], every  # every lane exited, and waited, together
