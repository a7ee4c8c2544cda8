"""Interleaved timing of a student kernel against the reference kernel on the GPU.

The protocol (``docs/performance.md``; the measurement principles in ``docs/gpu-facts.md``):

- both kernels are loaded through :class:`GpuBackend`'s module cache and run in the same
  process, interleaved A B A B ..., so that clock and thermal drift hit both alike;
- inputs rotate among several freshly drawn sets (each its own seed), so neither the L2
  nor a kernel that remembers its last answer sees the same data twice in a row;
- on each input set both kernels run, one after the other, on that set's own device
  buffers, each kernel first on every other set of a round;
- before each launch, outside the events: the outputs are poisoned again (NaN, or the
  integer sentinel: a memset where it repeats a 32-bit word, else a copy), and the L2 is
  flushed by a kernel that reads ``flush_bytes`` (by default twice the device's L2: 120 MiB
  on the H200, whose medians it leaves where 256 MiB did). A read, not a memset: a memset
  leaves the L2 full of dirty lines, which the timed kernel then writes back, a cost that is
  not the kernel's (on the H200: 8.7 of the reduction's 72.9 µs, 4.6 of the transpose's 140)
  and that pulls every ratio towards 1;
- the inputs are not copied before each launch (until 2026-12-03 they were, into one set of
  working buffers: that copy was most of the GPU's time for the short kernels,
  ``bench/results/timing-spread.md``). They are declared ``const``; a kernel that writes
  them anyway is found by comparing them with pristine copies, after a round with a wrong
  output and after the last round, and from then on every set's inputs are restored before
  each launch and what ran on changed inputs runs again (``_Session``). So an address
  identifies an input set, as a sampled value does: a kernel replaying an answer by either
  passes the output check, and is flagged by the case's physical floor instead
  (``performance.py``; ``docs/known-gaps.md``);
- CUDA events around each launch only; the first round over every input set is warm-up
  and is not timed;
- after each timed launch a small kernel counts, on the device, the outputs that differ
  from the reference kernel's outputs for that input set (tolerance: the request's factor
  times the spec's, as both kernels carry float32 rounding). A kernel that is right only on
  its first call, that replays another set's answer from a ``__device__`` global, or that
  writes nothing after its first call, fails here;
- rounds repeat until the ratio of the medians is known to ``target_spread`` (its relative
  standard error, from both medians') after ``min_repeats``, or until ``budget_s`` or
  ``max_repeats`` ends them. A short kernel's launches vary by a few percent among
  themselves (a 73 µs reduction: 3 % from the 10th to the 90th percentile on the H200), so it
  needs hundreds of launches where a long one settles after the first 30
  (``bench/results/timing-spread.md``). A grading asks the precision its item's score needs
  instead (``performance.Scoring``: the score known to 0.005 points, 0.13-0.21 % of the ratio
  for this course's items), and names the ratios between which the score changes
  (``scored_between``): the rounds end as well, after ``min_repeats``, once the ratio is known to
  lie outside them (``stop_reason``: ``DECIDED``), where more launches could not change the score: a kernel as
  fast as the reference against a full_at of 1.2 or more, or one five times slower against a
  zero_at of 4;
- a round is one pass over the input sets. The next round is queued on the GPU before the host
  waits for this one (``rounds_in_flight``, 2 by default), so the GPU has work while the host
  reads a round's counts and applies the stop rule (for the reduction, 0.8 ms of host a round of
  six 64 µs launches, during which one round at a time left the GPU idle). The round in flight
  when the rule is met is timed and kept, a round queued behind a wrong output is set aside
  unjudged. Within a round each kernel goes first on every other pair, and who goes first on
  each round's first pair is drawn (``_Session._order`` says why not alternated);
- each round waits on the GPU behind a gate (``GATE_PROGRAM``) until the host has queued all of
  it, so that no timed launch waits for the host between its events; the stop rule is applied
  once the launches timed have grown by a sixteenth since it last was.

The physical floor of a case (the least time any correct kernel needs) is the grading
side's business (``performance.py``): it knows the work a case must do; this module only
measures. PyCUDA is imported by :class:`GpuBackend`; this module imports without it.
"""

from __future__ import annotations

import collections
import contextlib
import math
import subprocess
import time
from collections.abc import Callable, Sequence

import numpy as np

from autograder.contract import Buffer, Launch, LaunchFailure, Program, Timing, TimingRequest
from autograder.errors import AutograderError

WHO = ("student", "reference")
ORDERS_SEED = 27  # the rounds' drawn orders (``_Session._order``): the same in every session
DECIDED_ERRORS = 4.0  # a ratio this many standard errors outside the scored range is ``decided``

COMPARE_SOURCE = r"""
extern "C" __global__ void count_mismatches(const VALUE* got, const VALUE* want, unsigned long long n,
                                            double atol, double rtol, unsigned int* bad)
{
    unsigned int mine = 0;
    bool exact = atol == 0.0 && rtol == 0.0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        /* integers exactly, not as doubles (where 2**53 + 1 is 2**53); NaN is never within */
        VALUE g = got[i], w = want[i];
        bool within = g == w || (!exact && !isinf((double)w)
                                 && fabs((double)g - (double)w) <= atol + rtol * fabs((double)w));
        if (!within) mine++;
    }
    if (mine) atomicAdd(bad, mine);
}
"""
C_TYPES = {
    "uint8": "unsigned char",  # the bytes of inputs, checked against their pristine copies
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
}


# Reads the flush buffer (filled once with 0x01 bytes), 16 bytes a thread at a time; the XOR of
# what a thread read is never the constant, so the sink is never written, but the loads stay.
FLUSH_SOURCE = r"""
extern "C" __global__ void read_flush(const uint4* p, unsigned long long n, unsigned int* sink)
{
    uint4 acc = make_uint4(0, 0, 0, 0);
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        uint4 v = p[i];
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) atomicAdd(sink, 1u);
}
"""
FLUSH_PROGRAM = Program(FLUSH_SOURCE, "read_flush.cu", "read_flush")
FLUSH_BLOCKS = 1024

# Holds a round back on the GPU until the host has queued all of it (it writes the round's number
# into page-locked host memory the GPU reads): without it, a GPU that ran through its queue faster
# than the host filled it reached a launch's start event before the host had queued the kernel,
# and timed the host's wait with the kernel (bench/results/timing-spread.md, 2026-12-03 19:20).
GATE_SOURCE = r"""
extern "C" __global__ void wait_for_round(const volatile unsigned int* released, unsigned int round)
{
    while (*released < round) {
    }
}
"""
GATE_PROGRAM = Program(GATE_SOURCE, "wait_for_round.cu", "wait_for_round")


def time_case(backend, request: TimingRequest) -> Timing:
    """Run the protocol on ``backend`` (a :class:`GpuBackend`) and return the evidence."""
    backend.check_usable()
    with backend.active():
        with backend.grader_failures("setting up the timing's input sets on the GPU"):
            reading = query_clocks(backend)  # answered while the session uploads its input sets
            session = _Session(backend, request)  # nothing of the student's has run yet
        try:
            with backend.cuda_failures(request.student[0].program, LaunchFailure):
                samples, wrong = session.measure()
        finally:
            session.free()
    return Timing(
        case=dict(request.case),
        student_ms=_median(samples["student"]),
        reference_ms=_median(samples["reference"]),
        student_spread=median_spread(samples["student"]),
        reference_spread=median_spread(samples["reference"]),
        repeats=len(samples["student"]),
        input_sets=len(request.student),
        device=backend.device_name,
        clocks=reading(),
        wrong=wrong,
        decided=session.stopped == DECIDED,
    )


def _median(samples_ms: Sequence[float]) -> float:
    return float(np.median(samples_ms)) if samples_ms else math.nan  # none: wrong at warm-up


def median_spread(samples_ms: Sequence[float]) -> float:
    """Relative standard error of the median: 1.2533 sigma / sqrt(n) / median.

    sigma is estimated from the interquartile range (IQR / 1.349), so that a few launches
    delayed by something else on the machine do not stop the repeats from settling.
    """
    return _median_and_spread(samples_ms)[1]


def _median_and_spread(samples_ms: Sequence[float]) -> tuple[float, float]:
    """The median and :func:`median_spread`, from one pass over the launches."""
    values = np.asarray(samples_ms, dtype=np.float64)
    if values.size < 2:
        return float(np.median(values)) if values.size else math.nan, math.inf
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    sigma = (q3 - q1) / 1.349
    return float(median), float(1.2533 * sigma / math.sqrt(values.size) / median)


SETTLED, DECIDED = "settled", "decided"


def stop_reason(
    student_ms: Sequence[float],
    reference_ms: Sequence[float],
    target: float,
    min_repeats: int,
    scored_between: tuple[float, float] | None = None,
) -> str | None:
    """Why the repeats may end, or None: enough of them, and the ratio of the medians known to
    within ``target`` (``SETTLED``: the relative errors of two independent medians add in
    quadrature), or known to lie below ``scored_between[0]`` or above ``scored_between[1]`` (the
    ratios between which a score changes) by ``DECIDED_ERRORS`` of its standard errors
    (``DECIDED``: more launches would refine the ratio, not the score). Each kernel's launches
    are sorted once for both (a rule's application over thousands of launches costs the host
    about as much as a short kernel's round costs the GPU)."""
    if min(len(student_ms), len(reference_ms)) < min_repeats:
        return None
    (student, student_spread), (reference, reference_spread) = map(
        _median_and_spread, (student_ms, reference_ms)
    )
    error = math.hypot(student_spread, reference_spread)
    if error < target:
        return SETTLED
    ratio, margin = student / reference, DECIDED_ERRORS * error
    if scored_between and (
        ratio * (1 + margin) < scored_between[0] or ratio * (1 - margin) > scored_between[1]
    ):
        return DECIDED
    return None


class _Buffers:
    """Device copies of some of a launch's buffers, by name."""

    def __init__(self, cuda, buffers: list[Buffer], upload: bool):
        self.cuda = cuda
        self.nbytes = {b.name: b.data.nbytes for b in buffers}
        self.memory = {b.name: cuda.mem_alloc(max(b.data.nbytes, 1)) for b in buffers}
        for b in buffers if upload else ():
            cuda.memcpy_htod(self.memory[b.name], np.ascontiguousarray(b.data))

    def copy_to(self, other: _Buffers, stream) -> None:
        """Each buffer that both hold, from this one into ``other``."""
        for name in [name for name in self.memory if name in other.memory]:
            self.cuda.memcpy_dtod_async(other.memory[name], self.memory[name], self.nbytes[name], stream)

    def free(self) -> None:
        for memory in self.memory.values():
            memory.free()


class _InputSet:
    """One input set on the device, in buffers of its own.

    ``working`` is what both kernels' launches on this set read and write; ``pristine`` keeps
    its inputs as drawn, to check them against and to restore them from; ``expected`` holds the
    reference kernel's outputs. Before every launch the outputs are poisoned again: by a memset
    where the poison repeats one 32-bit word (``words``: NaN, an integer sentinel, as the
    session finds before any launch), which only writes them, else by a copy from ``poison``.
    """

    def __init__(self, cuda, launch: Launch, stream):
        buffers = _buffers(launch)
        self.cuda = cuda
        self.outputs = [b for b in buffers if b.is_output]
        self.working = _Buffers(cuda, buffers, upload=True)  # inputs, and outputs poisoned
        self.pristine = _Buffers(cuda, [b for b in buffers if not b.is_output], upload=False)
        self.expected = _Buffers(cuda, self.outputs, upload=False)
        self.working.copy_to(self.pristine, stream)
        self.first_words = {b.name: w for b in self.outputs if (w := _first_word(b.data)) is not None}
        self.words: dict[str, int] = {}
        self.poison = _Buffers(cuda, [], upload=False)
        self.args = [
            np.uintp(int(self.working.memory[a.name]))
            if isinstance(a, Buffer)
            else np.dtype(a.dtype).type(a.value)
            for a in launch.args
        ]

    def keep_poison(self, words: dict[str, int], stream) -> None:
        """Poison by a memset of these words; keep a copy of the other outputs' poison."""
        self.words = words
        self.poison = _Buffers(self.cuda, [b for b in self.outputs if b.name not in words], upload=False)
        self.working.copy_to(self.poison, stream)

    def poison_outputs(self, stream) -> None:
        for name, word in self.words.items():
            self.cuda.memset_d32_async(
                self.working.memory[name], word, self.working.nbytes[name] // 4, stream
            )
        self.poison.copy_to(self.working, stream)

    def restore_inputs(self, stream) -> None:
        self.pristine.copy_to(self.working, stream)

    def free(self) -> None:
        for buffers in (self.working, self.pristine, self.poison, self.expected):
            buffers.free()


def _first_word(data: np.ndarray) -> int | None:
    """The first 32-bit word of ``data``, if it is made of whole words."""
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return int(raw[:4].view(np.uint32)[0]) if raw.size and raw.size % 4 == 0 else None


class _Round:
    """What a round of launches queued on the GPU needs of its own: events around each launch,
    the device's counts of wrong outputs, their copy in page-locked host memory (so that the
    copy queues behind the round instead of waiting for it), and the event that says it is there."""

    def __init__(self, cuda, launches: int):
        self.events = [(cuda.Event(), cuda.Event()) for _ in range(launches)]
        self.bad = cuda.mem_alloc(4 * launches)
        self.counts = cuda.pagelocked_empty(launches, np.uint32)
        self.copied = cuda.Event()
        self.slots: list[tuple[str, int, int]] = []  # who ran, on which set, its launch number


class _Session:
    """The device state of one timing: kernels, input sets, flush, events.

    Each input set lives in buffers of its own, which both kernels' launches on that set use:
    no copy of the inputs before a launch, only the outputs poisoned again. Inputs are declared
    ``const``; a kernel that writes them anyway is caught by comparing every set's inputs with
    their pristine copies after a round in which an output was wrong (before anyone is blamed)
    and after the last round. From the first change on, the session restores every set's
    inputs before each launch (``restoring``), and whatever ran on changed inputs is run
    again: the round, or every timed round.
    """

    def __init__(self, backend, request: TimingRequest):
        self.cuda = backend.driver  # the backend's driver module; its context is current
        self.request = request
        first = request.student[0]
        self.kernels = {
            "student": backend.function(first.program, first.shared_bytes),
            "reference": backend.function(request.reference, first.shared_bytes),
        }
        self.outputs = [(b.name, b.data.size, str(b.data.dtype)) for b in _buffers(first) if b.is_output]
        self.compare = {
            dtype: backend.function(_compare_program(dtype))
            for dtype in {d for _n, _s, d in self.outputs} | {"uint8", "uint32"}
        }
        self.stream = self.cuda.Stream()
        self.sets = [_InputSet(self.cuda, launch, self.stream) for launch in request.student]
        self._find_repeated_words()
        self.flush_bytes = request.flush_bytes or 2 * backend.l2_bytes
        self.flush = self.cuda.mem_alloc(self.flush_bytes)
        self.cuda.memset_d32_async(self.flush, 0x01010101, self.flush_bytes // 4, self.stream)
        self.flusher = backend.function(FLUSH_PROGRAM)
        self.sink = self.cuda.mem_alloc(4)
        self.gate = backend.function(GATE_PROGRAM)
        self.released = self.cuda.pagelocked_empty(
            1, np.uint32, mem_flags=self.cuda.host_alloc_flags.DEVICEMAP
        )
        self.released[0] = 0  # the last round the host has queued whole
        self.released_on_device = np.uintp(self.released.base.get_device_pointer())  # what the gate reads
        self.rounds = [_Round(self.cuda, 2 * len(self.sets)) for _ in range(request.rounds_in_flight)]
        self.free_rounds = list(self.rounds)  # those not queued
        self.changed = self.cuda.mem_alloc(4)
        self.launches = dict.fromkeys(WHO, 0)  # each kernel's launches so far, warm-up's too
        self.rounds_run = 0
        self.orders = np.random.default_rng(ORDERS_SEED)  # who goes first in each round (``_order``)
        # the stop rule's next application, in launches timed of each kernel
        self.next_check = request.min_repeats
        self.stopped: str | None = None  # why the stop rule held (``stop_reason``), None while it has not
        self.restoring = False  # a kernel changed its inputs: restore them before every launch

    def measure(self) -> tuple[dict[str, list[float]], str | None]:
        """The reference's outputs on every set, then timed rounds until settled; stop at the
        first wrong output. Timed again, inputs restored, if the last check finds them changed."""
        for input_set in self.sets:
            self._launch("reference", input_set)
            input_set.working.copy_to(input_set.expected, self.stream)
        while True:
            samples, wrong = self._timed_rounds()
            if wrong is not None or self.restoring or not self._inputs_changed():
                return samples, wrong

    def _timed_rounds(self) -> tuple[dict[str, list[float]], str | None]:
        """A warm-up round, then timed rounds until settled or wrong, ``rounds_in_flight`` of them
        queued on the GPU at a time: the next ones run while the host judges the first."""
        wrong = self._judge(self._queue(), {}, timed=False)
        samples: dict[str, list[float]] = {who: [] for who in WHO}
        self.next_check, self.stopped = self.request.min_repeats, None
        started = time.monotonic()
        queued: collections.deque[_Round] = collections.deque()
        while wrong is None:
            while len(queued) < self.request.rounds_in_flight and not self._done(samples, queued, started):
                queued.append(self._queue())
            if not queued:
                break
            wrong = self._judge(queued.popleft(), samples, timed=True, behind=queued)
        return samples, wrong

    def _done(self, samples: dict[str, list[float]], queued: Sequence[_Round], started: float) -> bool:
        """No more rounds to queue: the launches timed and queued reach ``max_repeats``, the budget
        is spent, or the ratio is settled or decided (``stop_reason``) on what was timed so far.
        The rule is applied once the launches timed have grown by a sixteenth since it last was
        (``next_check``): its percentiles over every launch so far cost the host more than a
        short kernel's round costs the GPU (0.4 ms against 0.6 for the reduction), and would leave
        the GPU waiting."""
        r = self.request
        timed = len(samples["student"])
        repeats = timed + sum(len(q.slots) for q in queued) // 2
        if repeats >= r.max_repeats or time.monotonic() - started > r.budget_s:
            return True
        if self.stopped is None and timed >= self.next_check:
            self.next_check = max(r.min_repeats, timed + timed // 16)
            self.stopped = stop_reason(
                samples["student"], samples["reference"], r.target_spread, r.min_repeats, r.scored_between
            )
        return self.stopped is not None

    def _judge(
        self,
        done: _Round,
        samples: dict[str, list[float]],
        timed: bool,
        behind: collections.deque | None = None,
    ) -> str | None:
        """Wait for the round ``done``, check its counts, and add its launches' times to
        ``samples`` when ``timed``; the sentence for the first wrong output, if any.

        After a round with a wrong output, the rounds queued ``behind`` it are set aside unjudged
        (they may have run on changed inputs) and the inputs are checked first: if a kernel changed
        them, the round runs again on restored inputs before anything is judged."""
        slots, counts = self._wait(done)
        if counts.any():
            while behind:
                self._wait(behind.popleft())
            if not self.restoring and self._inputs_changed():
                done = self._queue()
                slots, counts = self._wait(done)
        for slot, (who, index, launch) in enumerate(slots):
            if counts[slot] and who == "reference":
                raise ReferenceUnstableError(
                    f"the reference kernel gave {counts[slot]} outputs that differ from its own first "
                    f"outputs on input set {index} (its launch {launch})"
                )
            if counts[slot]:
                return _wrong_sentence(launch, index, int(counts[slot]))
            if timed:
                start, end = done.events[slot]
                samples[who].append(start.time_till(end))
        return None

    def _queue(self) -> _Round:
        """Queue a pair of launches on every input set, each launch's check of its outputs, and
        the copy of the round's counts to the host, all behind the round's gate, opened once the
        last is queued; the round, its slots (who ran, on which set, its launch number) filled in."""
        done = self.free_rounds.pop()
        self.rounds_run += 1
        self._hold(self.rounds_run)
        try:
            self.cuda.memset_d32_async(done.bad, 0, len(done.events), self.stream)
            done.slots = []
            first = int(self.orders.integers(2))  # who goes first on the round's first pair
            for index, input_set in enumerate(self.sets):
                for who in self._order(index, first):
                    slot = len(done.slots)
                    self._launch(who, input_set, done.events[slot])
                    self._count_mismatches(input_set, int(done.bad) + 4 * slot)
                    self.launches[who] += 1
                    done.slots.append((who, index, self.launches[who]))
            self.cuda.memcpy_dtoh_async(done.counts, done.bad, self.stream)
            done.copied.record(self.stream)
        finally:
            self._release(self.rounds_run)
        return done

    def _hold(self, round_number: int) -> None:
        """Queue the gate that holds the GPU until the host releases ``round_number``."""
        self.gate(
            self.released_on_device,
            np.uint32(round_number),
            grid=(1, 1, 1),
            block=(1, 1, 1),
            stream=self.stream,
        )

    def _release(self, round_number: int) -> None:
        self.released[0] = round_number

    def _wait(self, done: _Round) -> tuple[list[tuple[str, int, int]], np.ndarray]:
        """The round's slots and counts of wrong outputs, once the GPU is through it; its buffers
        free for another round (its events stay readable until that round is queued)."""
        done.copied.synchronize()
        self.free_rounds.append(done)
        return done.slots, done.counts.copy()

    @staticmethod
    def _order(pair: int, first: int) -> tuple[str, ...]:
        """Who runs first on a round's ``pair``-th pair, ``WHO[first]`` on its first: each kernel
        on every other pair, so that whatever running first or second costs falls on both alike.
        ``first`` is drawn for each round (``orders``): on the H200 every schedule that turned the
        order with the rounds' count met something the GPU or the host does periodically over
        rounds. The reduction's reference timed against itself read 0.998 in every session when
        the order turned every round, 1.0017 with that order reversed, 0.998 again when it turned
        every second round; with a drawn order, 1.0000 in five sessions of six and 1.0005 in the
        sixth (2026-12-03, ``bench/results/timing-spread.md``)."""
        return WHO if (first + pair) % 2 == 0 else WHO[::-1]

    def _flush(self) -> None:
        """Leave nothing of the last launch in the L2, and nothing dirty: a read of the flush buffer."""
        words = np.uint64(self.flush_bytes // 16)
        self.flusher(
            self.flush, words, self.sink, grid=(FLUSH_BLOCKS, 1, 1), block=(256, 1, 1), stream=self.stream
        )

    def _launch(self, who: str, input_set: _InputSet, events=None) -> None:
        """``who``'s kernel on ``input_set``, its outputs poisoned first (and its inputs restored,
        when restoring), between ``events`` when given. The L2 flush goes between the two."""
        if self.restoring:
            input_set.restore_inputs(self.stream)
        input_set.poison_outputs(self.stream)
        launch = self.request.student[0]
        if events:
            self._flush()
            events[0].record(self.stream)
        self.kernels[who](
            *input_set.args,
            grid=launch.grid,
            block=launch.block,
            shared=launch.shared_bytes,
            stream=self.stream,
        )
        if events:
            events[1].record(self.stream)

    def _count_mismatches(self, input_set: _InputSet, into: int) -> None:
        r = self.request
        for name, n, dtype in self.outputs:
            exact = np.dtype(dtype).kind in "iu"  # integers compare exactly, as the grader's comparison does
            atol, rtol = (0.0, 0.0) if exact else (r.tolerance_factor * r.atol, r.tolerance_factor * r.rtol)
            got, want = input_set.working.memory[name], input_set.expected.memory[name]
            self._count(dtype, got, want, n, atol, rtol, into)

    def _count(self, dtype: str, got, want, n: int, atol: float, rtol: float, into: int) -> None:
        """Add to the counter at ``into`` the elements of ``got`` not within tolerance of ``want``."""
        blocks = int(min(max(1, -(-n // 256)), 4096))
        self.compare[dtype](
            np.uintp(int(got)),
            np.uintp(int(want)),
            np.uint64(n),
            np.float64(atol),
            np.float64(rtol),
            np.uintp(into),
            grid=(blocks, 1, 1),
            block=(256, 1, 1),
            stream=self.stream,
        )

    def _find_repeated_words(self) -> None:
        """Which outputs' poison repeats its first 32-bit word throughout, told on the device
        before any launch (a scan on the host cost 50 ms a set for a 2**26-element output): the
        freshly uploaded poison is compared with a memset of that word, made in ``expected``,
        which the reference's outputs replace later."""
        asked = [(s, name, word) for s in self.sets for name, word in s.first_words.items()]
        counts = self.cuda.mem_alloc(4 * max(len(asked), 1))
        self.cuda.memset_d32_async(counts, 0, max(len(asked), 1), self.stream)
        for k, (input_set, name, word) in enumerate(asked):
            words, want = input_set.working.nbytes[name] // 4, input_set.expected.memory[name]
            self.cuda.memset_d32_async(want, word, words, self.stream)
            self._count("uint32", input_set.working.memory[name], want, words, 0.0, 0.0, int(counts) + 4 * k)
        self.stream.synchronize()
        differing: np.ndarray = np.empty(max(len(asked), 1), dtype=np.uint32)
        self.cuda.memcpy_dtoh(differing, counts)
        counts.free()
        for input_set in self.sets:
            found = zip(asked, differing, strict=False)
            input_set.keep_poison(
                {name: word for (s, name, word), n in found if s is input_set and n == 0}, self.stream
            )

    def _inputs_changed(self) -> bool:
        """Whether a kernel changed an input of any set (byte for byte); if one did, every set's
        inputs are restored, and from now on before every launch."""
        self.cuda.memset_d32_async(self.changed, 0, 1, self.stream)
        for input_set in self.sets:
            for name, memory in input_set.pristine.memory.items():
                nbytes = input_set.pristine.nbytes[name]
                self._count(
                    "uint8", input_set.working.memory[name], memory, nbytes, 0.0, 0.0, int(self.changed)
                )
        self.stream.synchronize()
        changed: np.ndarray = np.empty(1, dtype=np.uint32)
        self.cuda.memcpy_dtoh(changed, self.changed)
        if changed[0]:
            self.restoring = True
            for input_set in self.sets:
                input_set.restore_inputs(self.stream)
        return bool(changed[0])

    def free(self) -> None:
        """Give the memory back; after a crash the context goes, and its memory with it."""
        with contextlib.suppress(self.cuda.Error):
            self.stream.synchronize()
            for input_set in self.sets:
                input_set.free()
            for memory in (self.flush, self.sink, self.changed, *(r.bad for r in self.rounds)):
                memory.free()
            self.released.base.free()


def _buffers(launch: Launch) -> list[Buffer]:
    return [arg for arg in launch.args if isinstance(arg, Buffer)]


def _compare_program(dtype: str) -> Program:
    if dtype not in C_TYPES:
        raise NotImplementedError(f"timing cannot check outputs of dtype {dtype}")
    return Program(COMPARE_SOURCE, "count_mismatches.cu", "count_mismatches", (("VALUE", C_TYPES[dtype]),))


class ReferenceUnstableError(AutograderError, RuntimeError):
    """The reference kernel disagreed with itself: a grader problem, never the student's."""


def _wrong_sentence(launch: int, input_set: int, count: int) -> str:
    """What a student reads when a timed (or warm-up) launch computed a wrong answer."""
    return (
        f"launch {launch} of your kernel (input set {input_set}) gave {count} outputs that "
        "differ from the reference kernel's: every call must compute its answer from its inputs "
        "(no results kept from an earlier call)"
    )


# and which physical GPU it is: two H200s lent a day apart timed the same reference kernel 3 % apart
# (docs/known-gaps.md), so a ratio is evidence only with the unit that measured it
CLOCK_NAMES = ("sm_mhz", "mem_mhz", "max_sm_mhz", "power_w", "temperature_c", "gpu_uuid")
CLOCK_QUERY = "pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu,uuid"


def clocks(backend) -> dict[str, str]:
    """The device's clocks, power, temperature and UUID now, read with ``nvidia-smi`` (read-only)."""
    return query_clocks(backend)()


def query_clocks(backend) -> Callable[[], dict[str, str]]:
    """Start reading the clocks with ``nvidia-smi`` (best effort: {} without it); the function
    returned waits for the answer. A timing starts it first, so that the tool's tenth of a
    second passes while the GPU works instead of while it waits."""
    try:
        bus = backend.device.pci_bus_id().lower().split(":", 1)[-1]
        process = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={CLOCK_QUERY}", "--format=csv,noheader,nounits"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except (OSError, AttributeError):
        return dict

    def answer() -> dict[str, str]:
        try:
            out, _ = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            return {}
        lines = (
            [[v.strip() for v in line.split(",")] for line in out.splitlines()]
            if not process.returncode
            else []
        )
        return next(
            (dict(zip(CLOCK_NAMES, v[1:], strict=False)) for v in lines if v[0].lower().endswith(bus)), {}
        )

    return answer
