"""Interleaved timing of a student kernel against the reference kernel on the GPU.

The protocol (``docs/performance.md``; the measurement principles in ``docs/gpu-facts.md``):

- both kernels are loaded through :class:`GpuBackend`'s module cache and run in the same
  process, on the same device buffers, interleaved A B A B ..., so that clock and thermal
  drift hit both alike;
- inputs rotate among several freshly drawn sets (each its own seed), so neither the L2
  nor a kernel that remembers its last answer sees the same data twice in a row;
- on each input set both kernels run, one after the other, the student's first on every
  other set and the reference's on the rest;
- before each launch, outside the events: its input set is copied into the one set of
  working buffers every launch uses (so an address never identifies an input set, an
  input the kernel overwrote is restored, and the outputs start as NaN again), and the L2
  is flushed by a kernel that reads ``flush_bytes`` (256 MiB by default, over four times the
  H200's 60 MiB). A read, not a memset: a memset leaves the L2 full of dirty lines, which the
  timed kernel then writes back, a cost that is not the kernel's (on the H200: 8.7 of the
  reduction's 72.9 µs, 4.6 of the transpose's 140) and that pulls every ratio towards 1;
- CUDA events around each launch only; the first round over every input set is warm-up
  and is not timed;
- after each timed launch a small kernel counts, on the device, the outputs that differ
  from the reference kernel's outputs for that input set (tolerance: the request's factor
  times the spec's, as both kernels carry float32 rounding). A kernel that is right only on
  its first call, or
  that caches results across calls in a ``__device__`` global, fails here;
- rounds repeat until the ratio of the medians is known to ``target_spread`` (its relative
  standard error, from both medians') after ``min_repeats``, or until ``budget_s`` or
  ``max_repeats`` ends them. A short kernel's launches vary by a few percent among
  themselves (a 73 µs reduction: 3 % from the 10th to the 90th percentile on the H200), so it
  needs hundreds of launches where a long one settles after the first 30
  (``bench/results/timing-spread.md``).

The physical floor of a case (the least time any correct kernel needs) is the grading
side's business (``performance.py``): it knows the work a case must do; this module only
measures. PyCUDA is imported by :class:`GpuBackend`; this module imports without it.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import time
from collections.abc import Sequence

import numpy as np

from autograder.contract import Buffer, Launch, LaunchFailure, Program, Timing, TimingRequest
from autograder.errors import AutograderError

WHO = ("student", "reference")

COMPARE_SOURCE = r"""
extern "C" __global__ void count_mismatches(const VALUE* got, const VALUE* want, unsigned long long n,
                                            double atol, double rtol, unsigned int* bad)
{
    unsigned int mine = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        double g = (double)got[i], w = (double)want[i];
        bool within = isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w);  /* NaN: false */
        if (!within) mine++;
    }
    if (mine) atomicAdd(bad, mine);
}
"""
C_TYPES = {
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


def time_case(backend, request: TimingRequest) -> Timing:
    """Run the protocol on ``backend`` (a :class:`GpuBackend`) and return the evidence."""
    backend.check_usable()
    with backend.active(), backend.cuda_failures(request.student[0].program, LaunchFailure):
        session = _Session(backend, request)
        try:
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
        clocks=clocks(backend),
        wrong=wrong,
    )


def _median(samples_ms: list[float]) -> float:
    return float(np.median(samples_ms)) if samples_ms else math.nan  # none: wrong at warm-up


def median_spread(samples_ms: Sequence[float]) -> float:
    """Relative standard error of the median: 1.2533 sigma / sqrt(n) / median.

    sigma is estimated from the interquartile range (IQR / 1.349), so that a few launches
    delayed by something else on the machine do not stop the repeats from settling.
    """
    values = np.asarray(samples_ms, dtype=np.float64)
    if values.size < 2:
        return math.inf
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    sigma = (q3 - q1) / 1.349
    return float(1.2533 * sigma / math.sqrt(values.size) / median)


def settled(
    student_ms: Sequence[float], reference_ms: Sequence[float], target: float, min_repeats: int
) -> bool:
    """Enough repeats, and the ratio of the medians known to within ``target`` (relative):
    the relative errors of two independent medians add in quadrature."""
    if min(len(student_ms), len(reference_ms)) < min_repeats:
        return False
    return math.hypot(median_spread(student_ms), median_spread(reference_ms)) < target


class _Buffers:
    """Device copies of a launch's buffers, by name."""

    def __init__(self, cuda, buffers: list[Buffer], upload: bool):
        self.cuda = cuda
        self.nbytes = {b.name: b.data.nbytes for b in buffers}
        self.memory = {b.name: cuda.mem_alloc(max(b.data.nbytes, 1)) for b in buffers}
        for b in buffers if upload else ():
            cuda.memcpy_htod(self.memory[b.name], np.ascontiguousarray(b.data))

    def copy_to(self, other: _Buffers, stream) -> None:
        """Every buffer of ``other`` from this one's buffer of the same name."""
        for name, memory in other.memory.items():
            self.cuda.memcpy_dtod_async(memory, self.memory[name], other.nbytes[name], stream)

    def free(self) -> None:
        for memory in self.memory.values():
            memory.free()


class _InputSet:
    """One input set on the device: every buffer before the launch, the reference's outputs."""

    def __init__(self, cuda, launch: Launch):
        buffers = _buffers(launch)
        self.before = _Buffers(cuda, buffers, upload=True)  # inputs, and outputs poisoned
        self.expected = _Buffers(cuda, [b for b in buffers if b.is_output], upload=False)

    def free(self) -> None:
        self.before.free()
        self.expected.free()


class _Session:
    """The device state of one timing: kernels, input sets, working buffers, flush, events.

    Every launch runs on the same working buffers, into which its input set is copied
    first: the addresses never tell a kernel which input set it is given, and an input a
    kernel overwrote is restored before the next launch.
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
        self.compare = {dtype: backend.function(_compare_program(dtype)) for _n, _s, dtype in self.outputs}
        self.stream = self.cuda.Stream()
        self.sets = [_InputSet(self.cuda, launch) for launch in request.student]
        self.working = _Buffers(self.cuda, _buffers(first), upload=False)
        self.args = [
            np.uintp(int(self.working.memory[a.name]))
            if isinstance(a, Buffer)
            else np.dtype(a.dtype).type(a.value)
            for a in first.args
        ]
        self.flush = self.cuda.mem_alloc(request.flush_bytes)
        self.cuda.memset_d32_async(self.flush, 0x01010101, request.flush_bytes // 4, self.stream)
        self.flusher = backend.function(FLUSH_PROGRAM)
        self.sink = self.cuda.mem_alloc(4)
        self.pairs = len(self.sets)  # pairs per round: one over every input set
        self.bad = self.cuda.mem_alloc(4 * 2 * self.pairs)
        self.events = [(self.cuda.Event(), self.cuda.Event()) for _ in range(2 * self.pairs)]
        self.launches = dict.fromkeys(WHO, 0)  # each kernel's launches so far, warm-up's too
        self.pairs_run = 0

    def measure(self) -> tuple[dict[str, list[float]], str | None]:
        """Warm up, then time rounds until settled; stop at the first wrong output."""
        for input_set in self.sets:
            input_set.before.copy_to(self.working, self.stream)
            self._launch("reference")
            self.working.copy_to(input_set.expected, self.stream)
        samples: dict[str, list[float]] = {who: [] for who in WHO}
        wrong = self._round(samples, timed=False)
        started = time.monotonic()
        while wrong is None and not self._done(samples, started):
            wrong = self._round(samples, timed=True)
        return samples, wrong

    def _done(self, samples: dict[str, list[float]], started: float) -> bool:
        r = self.request
        if len(samples["student"]) >= r.max_repeats or time.monotonic() - started > r.budget_s:
            return True
        return settled(samples["student"], samples["reference"], r.target_spread, r.min_repeats)

    def _round(self, samples: dict[str, list[float]], timed: bool) -> str | None:
        """One pass over every input set, student then reference on each; checked on the device."""
        self.cuda.memset_d32_async(self.bad, 0, 2 * self.pairs, self.stream)
        slots = []
        for index, input_set in enumerate(self.sets):
            for who in self._order():
                slot = len(slots)
                input_set.before.copy_to(self.working, self.stream)  # fresh inputs, poisoned outputs
                self._flush(slot)
                start, end = self.events[slot]
                start.record(self.stream)
                self._launch(who)
                end.record(self.stream)
                self._count_mismatches(input_set, slot)
                slots.append((who, index))
        self.stream.synchronize()
        counts = np.empty(2 * self.pairs, dtype=np.uint32)
        self.cuda.memcpy_dtoh(counts, self.bad)
        for slot, (who, index) in enumerate(slots):
            self.launches[who] += 1
            if counts[slot] and who == "reference":
                raise ReferenceUnstableError(
                    f"the reference kernel gave {counts[slot]} outputs that differ from its own first "
                    f"outputs on input set {index} (its launch {self.launches[who]})"
                )
            if counts[slot]:
                return _wrong_sentence(self.launches[who], index, int(counts[slot]))
            if timed:
                start, end = self.events[slot]
                samples[who].append(start.time_till(end))
        return None

    def _order(self) -> tuple[str, ...]:
        """Who runs first on the next input set: each kernel on every other one, so that
        whatever running first or second costs falls on both kernels alike."""
        self.pairs_run += 1
        return WHO if self.pairs_run % 2 else WHO[::-1]

    def _flush(self, slot: int) -> None:
        """Leave nothing of the last launch in the L2, and nothing dirty: a read of the flush buffer."""
        words = np.uint64(self.request.flush_bytes // 16)
        self.flusher(
            self.flush, words, self.sink, grid=(FLUSH_BLOCKS, 1, 1), block=(256, 1, 1), stream=self.stream
        )

    def _launch(self, who: str) -> None:
        launch = self.request.student[0]
        self.kernels[who](
            *self.args, grid=launch.grid, block=launch.block, shared=launch.shared_bytes, stream=self.stream
        )

    def _count_mismatches(self, input_set: _InputSet, slot: int) -> None:
        r = self.request
        for name, n, dtype in self.outputs:
            exact = np.dtype(dtype).kind in "iu"  # integers compare exactly, as the grader's comparison does
            atol, rtol = (0.0, 0.0) if exact else (r.tolerance_factor * r.atol, r.tolerance_factor * r.rtol)
            blocks = int(min(max(1, -(-n // 256)), 4096))
            self.compare[dtype](
                np.uintp(int(self.working.memory[name])),
                np.uintp(int(input_set.expected.memory[name])),
                np.uint64(n),
                np.float64(atol),
                np.float64(rtol),
                np.uintp(int(self.bad) + 4 * slot),
                grid=(blocks, 1, 1),
                block=(256, 1, 1),
                stream=self.stream,
            )

    def free(self) -> None:
        """Give the memory back; after a crash the context goes, and its memory with it."""
        with contextlib.suppress(self.cuda.Error):
            self.stream.synchronize()
            for input_set in self.sets:
                input_set.free()
            self.working.free()
            self.flush.free()
            self.sink.free()
            self.bad.free()


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


def clocks(backend) -> dict[str, str]:
    """The device's clocks, power and temperature now, read with ``nvidia-smi`` (read-only)."""
    names = ("sm_mhz", "mem_mhz", "max_sm_mhz", "power_w", "temperature_c")
    query = "pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu"
    try:
        bus = backend.device.pci_bus_id().lower()
        answer = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError, AttributeError):
        return {}
    for line in answer.splitlines():
        values = [v.strip() for v in line.split(",")]
        if values[0].lower().endswith(bus.split(":", 1)[-1]):
            return dict(zip(names, values[1:], strict=False))
    return {}
