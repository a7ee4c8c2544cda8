import contextlib
import dataclasses
import functools
import itertools
import math
import os
import types
from pathlib import Path

import numpy as np
import pytest

from autograder.backends import gpu_timing
from autograder.backends.gpu import GpuBackend, GraderCudaFault
from autograder.contract import (
    PRECISE_SPREAD,
    Buffer,
    Capabilities,
    Launch,
    LaunchFailure,
    Program,
    Timing,
    TimingRequest,
    Unsupported,
)
from autograder.contract import Scalar as ScalarArg
from autograder.course.cases import prepare_group, timing_requests
from autograder.course.rubric import Item
from autograder.course.spec import Array, Scalar, Spec, load_specs
from autograder.grading import checks
from autograder.grading import performance as perf
from autograder.grading.compare import CaseOutcome

ROOT = Path(__file__).resolve().parents[2]


def test_full_marks_at_and_below_full_at():
    assert perf.score_fraction(1.25, 1.25, 4.0) == 1.0
    assert perf.score_fraction(1.0, 1.25, 4.0) == 1.0
    assert perf.score_fraction(0.3, 1.25, 4.0) == 1.0


def test_zero_at_and_above_zero_at():
    assert perf.score_fraction(4.0, 1.25, 4.0) == 0.0
    assert perf.score_fraction(40.0, 1.25, 4.0) == 0.0
    assert perf.score_fraction(math.inf, 1.25, 4.0) == 0.0
    assert perf.score_fraction(math.nan, 1.25, 4.0) == 0.0


def test_log_interpolation_between():
    # sqrt(1 * 4) = 2 is half-way on a log scale between 1 and 4
    assert perf.score_fraction(2.0, 1.0, 4.0) == pytest.approx(0.5)
    assert perf.score_fraction(math.sqrt(2), 1.0, 4.0) == pytest.approx(0.75)


def test_score_is_monotone():
    ratios = np.geomspace(0.5, 8.0, 200)
    fractions = [perf.score_fraction(r, 1.25, 4.0) for r in ratios]
    assert (np.diff(fractions) <= 0).all()


def test_rejects_inverted_thresholds():
    with pytest.raises(ValueError, match="full_at"):
        perf.score_fraction(1.0, 4.0, 1.25)


def test_combined_ratio_is_geometric_mean():
    assert perf.combined_ratio([2.0, 8.0]) == pytest.approx(4.0)
    assert perf.combined_ratio([1.0, math.inf]) == math.inf
    assert math.isnan(perf.combined_ratio([1.0, math.nan]))
    assert perf.combined_ratio([0.0, 2.0]) == 0.0  # a conflict-free kernel: no log(0) warning


def _timing(student_ms, reference_ms=1.0, floor_ms=None, wrong=None):
    return Timing(
        case={"n": 1 << 24},
        student_ms=student_ms,
        reference_ms=reference_ms,
        student_spread=0.001,
        reference_spread=0.001,
        repeats=30,
        input_sets=4,
        device="NVIDIA H200",
        clocks={"sm_mhz": "1980"},
        floor_ms=floor_ms,
        wrong=wrong,
    )


def test_timing_evidence_carries_medians_spread_device_and_ratio():
    evidence = perf.score_timings([_timing(2.0, 1.0)], full_at=1.25, zero_at=4.0)
    assert evidence.metric == "time"
    assert evidence.ratio == pytest.approx(2.0)
    assert 0.0 < evidence.fraction < 1.0
    record = evidence.to_dict()["cases"][0]
    assert record["student_ms"] == 2.0 and record["reference_ms"] == 1.0
    assert record["repeats"] == 30 and record["device"] == "NVIDIA H200"
    assert record["clocks"] == {"sm_mhz": "1980"} and record["ratio"] == pytest.approx(2.0)
    assert "2.000x the reference" in evidence.message


def test_faster_than_reference_is_full_marks_and_said():
    evidence = perf.score_timings([_timing(0.8, 1.0)], full_at=1.25, zero_at=4.0)
    assert evidence.fraction == 1.0 and evidence.faster_than_reference
    assert "faster than the reference" in evidence.message
    assert not evidence.below_floor


def test_faster_than_reference_but_short_of_full_at_is_not_called_full_marks():
    evidence = perf.score_timings([_timing(0.8, 1.0)], full_at=0.5, zero_at=2.0)
    assert 0.0 < evidence.fraction < 1.0
    assert "full marks" not in evidence.message.split("(")[0] and "0.800x the reference" in evidence.message


@pytest.mark.parametrize("student_ms", [0.9997, 0.99951])
def test_a_ratio_that_prints_as_one_is_not_called_faster(student_ms):
    evidence = perf.score_timings([_timing(student_ms, 1.0)], full_at=1.3, zero_at=3.0)
    assert evidence.fraction == 1.0
    assert evidence.message == "time: 1.000x the reference (full marks at <= 1.3x, none at >= 3x)"


def test_a_ratio_that_prints_below_one_is_still_called_faster():
    evidence = perf.score_timings([_timing(0.9994, 1.0)], full_at=1.3, zero_at=3.0)
    assert evidence.message == "time: 0.999x the reference: faster than the reference, full marks"


def test_a_wrong_timed_launch_earns_nothing_however_fast():
    wrong = "timed launch 7 (input set 1) of your kernel gave 4096 wrong outputs"
    evidence = perf.score_timings([_timing(0.5, 1.0, wrong=wrong)], full_at=1.25, zero_at=4.0)
    assert evidence.fraction == 0.0 and wrong in evidence.message
    assert evidence.cases[0]["wrong"] == wrong


def test_time_under_the_physical_floor_is_flagged_not_trusted():
    # 1 GiB moved at 4.14 TB/s cannot take less than 0.259 ms
    floor = perf.H200.floor_ms(perf.Work(bytes=1 << 30))
    assert floor == pytest.approx(0.2594, rel=1e-3)
    evidence = perf.score_timings([_timing(0.1, 1.0, floor_ms=floor)], full_at=1.25, zero_at=4.0)
    assert evidence.below_floor
    assert "TA" in evidence.message and "; 1 case ran faster than" in evidence.message
    honest = perf.score_timings([_timing(0.3, 1.0, floor_ms=floor)], full_at=1.25, zero_at=4.0)
    assert not honest.below_floor


def test_floor_takes_the_larger_of_bytes_and_flops():
    ceilings = perf.Ceilings(copy_bytes_per_s=1e12, peak_flops=1e12, peak_half_flops=2e12)
    assert ceilings.floor_ms(perf.Work(bytes=1e9, flops=1e10)) == pytest.approx(10.0)
    assert ceilings.floor_ms(perf.Work(bytes=1e10, flops=1e9)) == pytest.approx(10.0)
    assert ceilings.floor_ms(perf.Work(bytes=1e9, flops=1e10, half=True)) == pytest.approx(5.0)


def test_a_gemm_that_replays_its_product_is_flagged_by_the_flop_floor():
    """C = AB at 4096^3 needs 2*4096^3 flops: 0.28 ms at the H200's TF32 peak, 0.14 ms at its
    FP16 peak. Copying a remembered C instead (128 MB, 0.03 ms) beats the byte floor only."""
    course = load_specs(ROOT)
    case = {"M": 4096, "N": 4096, "K": 4096, "T": 32}
    for name, peak in (("gemm_tiled", 495e12), ("gemm_tensor_core", 989e12)):
        spec = course[name]
        work = perf.minimum_work(spec, case)
        flops, half = work.flops, work.half
        assert flops == 2 * 4096**3 and half == (name == "gemm_tensor_core")
        floor = perf.H200.floor_ms(work)
        assert floor == pytest.approx(1e3 * flops / peak)
        replay = perf.score_timings([_timing(0.03, 0.45, floor_ms=floor)], full_at=1.5, zero_at=8.0)
        assert replay.below_floor and "held for a TA" in replay.message
        honest = perf.score_timings([_timing(0.45, 0.45, floor_ms=floor)], full_at=1.5, zero_at=8.0)
        assert not honest.below_floor


def _decided(ratio, decided=True, wrong=None, spread=0.002):
    return dataclasses.replace(
        _timing(ratio, wrong=wrong), decided=decided, student_spread=spread, reference_spread=spread
    )


@pytest.mark.parametrize(
    "timings, again",
    [
        ([_decided(1.0), _decided(0.9)], set()),  # all below full_at: full marks whatever the digits
        ([_decided(5.0), _decided(9.0)], set()),  # all above zero_at: none
        ([_decided(1.0), _decided(2.0, decided=False)], {0}),  # 1.0 enters a mean the score reads
        ([_decided(1.0), _decided(5.0)], {0, 1}),  # their mean, 2.2, is scored
        ([_decided(1.0), _decided(1.1, decided=False)], set()),  # settled below: still a decided mean
        ([_decided(5.0), _decided(1.1, decided=False)], {0}),
        ([_decided(1.0, spread=0.0005), _decided(2.0, decided=False)], set()),  # decided, precise enough
        ([_decided(2.0, decided=False)], set()),  # nothing decided
        ([_decided(1.0), _decided(5.0, decided=False, wrong="launch 3 ...")], set()),  # no points at all
    ],
)
def test_decided_timings_stand_only_where_they_decide_the_items_score(timings, again):
    assert perf.timed_again(timings, perf.Scoring((1.2, 4.0), 0.001)) == again
    assert perf.timed_again(timings, None) == set()


@pytest.mark.parametrize(
    "points, full_at, zero_at, spread",
    [
        (3, 1.25, 4.0, 0.00194),
        (4, 1.5, 8.0, 0.00209),
        (1, 1.2, 4.0, 0.00602),
        (20, 1.2, 1.5, 0.0008),
        (0, 1.2, 4.0, math.inf),  # worth nothing: no precision moves its score
    ],
)
def test_a_case_is_timed_to_know_its_items_score_to_half_a_hundredth_of_a_point(
    points, full_at, zero_at, spread
):
    """The score moves by points x dlog(ratio) / log(zero_at / full_at): a ratio known to the
    spread knows it to 0.005 points; never finer than the timing's finest, 0.08 %."""
    scoring = perf.Scoring.of(points, full_at, zero_at)
    assert scoring.between == (full_at, zero_at) and scoring.spread == pytest.approx(spread, rel=0.01)
    if not points:
        return
    ratio = 1.1 * full_at
    moved = points * (
        perf.score_fraction(ratio, full_at, zero_at)
        - perf.score_fraction(ratio * (1 + spread), full_at, zero_at)
    )
    if spread > PRECISE_SPREAD:
        assert moved == pytest.approx(perf.SCORE_ERROR, rel=0.01)
    else:  # 20 points between 1.2 and 1.5 would want 0.006 %: no more repeats give that
        assert scoring.spread == PRECISE_SPREAD and moved > perf.SCORE_ERROR


def test_timing_requests_rotate_fresh_input_sets_of_each_perf_case():
    spec = load_specs(ROOT)["vector_add"]
    source = (ROOT / "reference" / "vector_add.cu").read_text()
    small = dataclasses.replace(spec, cases={"perf": ({"n": 1000, "T": 256}, {"n": 999, "T": 128})})
    requests = list(timing_requests(small, {"student": source, "reference": source}, "perf", 7, 5.0))
    assert [r.case for r in requests] == [{"n": 1000, "T": 256}, {"n": 999, "T": 128}]
    a = [launch.args[0].data for launch in requests[0].student]
    assert len(a) == 3 and not np.array_equal(a[0], a[1]) and a[0].size == 1000
    graded = next(prepare_group(small, source, "perf", 7, 5.0)).launch.args[0].data  # input set 0
    assert not any(np.array_equal(graded, timed) for timed in a)  # timing never replays grading's inputs
    assert requests[1].reference.defines == requests[1].student[0].program.defines


def test_the_physical_floor_is_the_devices_for_the_cases_work():
    spec = load_specs(ROOT)["gemm_tensor_core"]
    work = perf.minimum_work(spec, {"M": 33, "N": 47, "K": 40})
    assert work.flops == 2 * 33 * 47 * 40 and work.half
    timed = perf.with_work(_timing(1.0, 1.0), work)
    assert timed.floor_ms == perf.H200.floor_ms(work) and timed.work_flops == 2 * 33 * 47 * 40
    elsewhere = dataclasses.replace(_timing(1.0, 1.0, floor_ms=3.0), device="a GPU without ceilings")
    assert perf.with_work(elsewhere, work).floor_ms is None
    assert perf.with_work(elsewhere, perf.Work(bytes=8)).work_flops is None  # no flops: no measured point


def test_minimum_bytes_counts_each_array_once():
    spec = Spec(
        name="window_sum",
        kernel="window_sum",
        args=(Array("x", "n + 4"), Array("y", "n", intent="out"), Scalar("n", "n")),
        block=("T",),
        grid=("cdiv(n, T)",),
        cases={"perf": ({"n": 1000, "T": 256},)},
        reference=lambda x, n: {"y": x[:n]},
    )
    assert perf.minimum_work(spec, {"n": 1000, "T": 256}).bytes == 4 * (1004 + 1000)


def test_counter_metric_scores_the_counter_ratio():
    counts = [
        perf.counter_ratio(
            "global_load_sectors", {"n": 1000}, {"global_load_sectors": 300}, {"global_load_sectors": 100}
        ),
    ]
    evidence = perf.score_counters("global_load_sectors", counts, full_at=1.0, zero_at=9.0)
    assert evidence.ratio == pytest.approx(3.0)
    assert evidence.fraction == pytest.approx(0.5)
    assert evidence.cases[0]["student"] == 300 and evidence.cases[0]["reference"] == 100
    assert "global_load_sectors" in evidence.message and not evidence.regrade


def test_counter_zero_in_reference():
    assert perf.CounterRatio({}, 0, 0).ratio == 1.0
    assert perf.CounterRatio({}, 5, 0).ratio == math.inf


def test_missing_counter_is_a_clear_error():
    with pytest.raises(KeyError, match="student"):
        perf.counter_ratio("flops", {}, {}, {"flops": 3})


def test_time_without_gpu_is_not_run_and_marked_for_regrading():
    assert perf.is_timed("time") and not perf.is_timed("global_load_sectors")
    evidence = perf.not_run("time")
    assert evidence.regrade and evidence.fraction == 0.0
    assert evidence.message.startswith("not run: needs a GPU")


def test_median_spread_shrinks_with_repeats_and_ignores_outliers():
    rng = np.random.default_rng(1)
    few = 1.0 + 0.01 * rng.standard_normal(10)
    many = 1.0 + 0.01 * rng.standard_normal(1000)
    assert gpu_timing.median_spread(many) < gpu_timing.median_spread(few)
    assert gpu_timing.median_spread(many) == pytest.approx(1.2533 * 0.01 / math.sqrt(1000), rel=0.15)
    spiky = np.concatenate([many, [50.0] * 20])  # 2 % of launches delayed 50x
    assert gpu_timing.median_spread(spiky) < 2 * gpu_timing.median_spread(many)
    assert gpu_timing.median_spread([1.0]) == math.inf


def test_settled_needs_both_repeats_and_a_small_spread_of_the_ratio():
    steady = [1.0, 1.001, 0.999] * 20
    assert gpu_timing.stop_reason(steady, steady, target=0.003, min_repeats=30) == gpu_timing.SETTLED
    assert not gpu_timing.stop_reason(steady[:9], steady, target=0.003, min_repeats=30)
    noisy = list(np.random.default_rng(2).uniform(0.5, 1.5, 60))
    assert not gpu_timing.stop_reason(steady, noisy, target=0.003, min_repeats=30)


@pytest.mark.parametrize(
    "ratio, spread, decided",
    [
        (1.0, 0.02, True),
        (1.18, 0.02, True),
        (1.19, 0.02, False),
        (1.3, 0.02, False),
        (3.9, 0.02, False),
        (4.03, 0.02, False),
        (4.05, 0.02, True),
        (4.4, 0.2, True),
        (4.4, 0.3, False),
    ],
)
def test_a_ratio_is_decided_only_four_of_its_errors_outside_the_scored_range(ratio, spread, decided):
    """200 launches of each kernel, the reference's spread 2 %: at the student's 2 % each median is
    known to about 0.18 %, their ratio to 0.25 %, and four errors are 1 %: decided below 1.2 under
    1.188, above 4 over 4.04. A student's spread of 20 % makes four errors 7 % (4.4 decided), of
    30 %, 11 % (4.4 not yet)."""
    rng = np.random.default_rng(4)
    reference = list(1.0 + 0.02 * rng.standard_normal(200))
    student = list(ratio * (1.0 + spread * rng.standard_normal(200)))

    def reason(student, reference, between):  # a target no ratio reaches: decided, or not at all
        return gpu_timing.stop_reason(student, reference, 0.0, 30, between)

    assert (reason(student, reference, (1.2, 4.0)) == gpu_timing.DECIDED) == decided
    assert not reason(student, reference, None)  # no range: never
    assert not reason(student[:20], reference[:20], (1.2, 4.0))


def test_the_ratio_is_settled_only_when_both_medians_errors_together_are_small():
    rng = np.random.default_rng(3)
    launches = list(1.0 + 0.02 * rng.standard_normal(1000))  # each median known to about 0.08 %
    each = gpu_timing.median_spread(launches)
    target = 1.2 * each  # each median alone is within it; their ratio, sqrt(2) times each, is not
    assert each < target and not gpu_timing.stop_reason(launches, launches[::-1], target, min_repeats=30)
    assert gpu_timing.stop_reason(launches, launches[::-1], 1.5 * each, min_repeats=30)


# --- the timing protocol (backends/gpu_timing.py) on a fake CUDA driver -------------------


class _FakeCuda:
    """Just enough of pycuda.driver: memory as numpy bytes, kernels as Python functions."""

    Error = RuntimeError
    Context = types.SimpleNamespace(synchronize=lambda: None)  # CUDA survives every error here

    def __init__(self):
        self.memory: dict[int, np.ndarray] = {}
        self.clock = itertools.count()
        self.next_address = 1 << 20

    def clock_now(self) -> int:
        """The clock's next tick, without taking it."""
        now = next(self.clock)
        self.clock = itertools.count(now)
        return now

    def mem_alloc(self, nbytes):
        address, self.next_address = self.next_address, self.next_address + nbytes + (1 << 20)
        self.memory[address] = np.zeros(nbytes, np.uint8)
        fake = self

        class Allocation(int):
            def free(self):
                fake.memory.pop(int(self))

        return Allocation(address)

    def view(self, address, dtype, count):
        base = max(a for a in self.memory if a <= int(address))
        offset = int(address) - base
        return self.memory[base][offset : offset + count * np.dtype(dtype).itemsize].view(dtype)

    def memcpy_htod(self, dest, src):
        self.view(dest, np.uint8, src.nbytes)[:] = np.ascontiguousarray(src).reshape(-1).view(np.uint8)

    def memcpy_dtoh(self, dest, src):
        dest.reshape(-1).view(np.uint8)[:] = self.view(src, np.uint8, dest.nbytes)

    def memcpy_dtoh_async(self, dest, src, stream=None):
        self.memcpy_dtoh(dest, src)

    host_alloc_flags = types.SimpleNamespace(DEVICEMAP=2)

    def pagelocked_empty(self, shape, dtype, mem_flags=0):
        """Host memory; mapped (DEVICEMAP): at an address of the fake device's too."""
        address = self.mem_alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize)
        array = self.view(address, dtype, int(np.prod(shape))).reshape(shape).view(_PageLocked)
        array.allocation = types.SimpleNamespace(get_device_pointer=lambda: int(address), free=address.free)
        return array

    def memcpy_dtod_async(self, dest, src, size, stream=None):
        self.view(dest, np.uint8, size)[:] = self.view(src, np.uint8, size)

    def memset_d32_async(self, dest, data, count, stream=None):
        self.view(dest, np.uint32, count)[:] = data

    def Stream(self):  # noqa: N802 - pycuda's name
        return type("Stream", (), {"synchronize": lambda self: None})()

    def Event(self):  # noqa: N802 - pycuda's name
        cuda = self

        class Event:
            def record(self, stream=None):
                self.at = next(cuda.clock)

            def synchronize(self):
                pass

            def time_till(self, other):
                return float(other.at - self.at)

        return Event()


class _PageLocked(np.ndarray):
    """An array whose ``base`` is its allocation, as pycuda's page-locked arrays are."""

    @property
    def base(self):
        return self.allocation


class _FakeBackend:
    device_name = "Fake GPU"
    l2_bytes = 1 << 15  # the flush, twice this, is checked byte by byte

    def __init__(self, kernels):
        self.driver = _FakeCuda()
        self.kernels = kernels  # program source -> Python kernel over (cuda, args)
        self._failure = None

    def check_usable(self):
        pass

    def active(self):
        return contextlib.nullcontext()

    # the GPU backend's own scopes: whose fault a CUDA error is
    cuda_failures = GpuBackend.cuda_failures
    grader_failures = GpuBackend.grader_failures
    _survived = GpuBackend._survived

    def function(self, program, shared_bytes=0):
        if program.filename == "count_mismatches.cu":
            value = dict(program.defines)["VALUE"]
            dtype = next(np.dtype(name) for name, c in gpu_timing.C_TYPES.items() if c == value)
            return functools.partial(self._compare, dtype)
        if program == gpu_timing.FLUSH_PROGRAM:
            return self._flush
        if program == gpu_timing.GATE_PROGRAM:
            return self._gate
        kernel = self.kernels[program.source]
        return lambda *args, **launch: kernel(self.driver, *args)

    def _gate(self, released, round_number, **launch):
        """Noted; the fake runs each command as it is queued, so nothing waits."""
        self.gates = [
            *getattr(self, "gates", []),
            (int(round_number), int(self.driver.view(released, np.uint32, 1)[0])),
        ]

    def _flush(self, flush, words, sink, **launch):
        """The L2 flush reads: the flush buffer keeps the bytes it was filled with."""
        self.flushes = getattr(self, "flushes", 0) + 1
        self.flushed_bytes = 16 * int(words)
        assert (self.driver.view(flush, np.uint8, 16 * int(words)) == 1).all()

    def _compare(self, dtype, got, want, n, atol, rtol, bad, **launch):
        g, w = (self.driver.view(p, dtype, int(n)).astype(np.float64) for p in (got, want))
        self.driver.view(bad, np.uint32, 1)[0] += int((~(np.abs(g - w) <= atol + rtol * np.abs(w))).sum())


def _vector_add(cuda, a, b, c, n, extra=1):
    n = int(n)
    cuda.view(c, np.float32, n)[:] = cuda.view(a, np.float32, n) + cuda.view(b, np.float32, n)
    cuda.clock = itertools.count(next(cuda.clock) + extra)  # "time" passes with the work


def _remembering():
    first = {}

    def kernel(cuda, a, b, c, n):
        if not first:
            _vector_add(cuda, a, b, c, n)
            first["c"] = cuda.view(c, np.float32, int(n)).copy()
        else:  # replays the first call's answer
            cuda.view(c, np.float32, int(n))[:] = first["c"]

    return kernel


def _request(student_source, n=1000, sets=3):
    rng = np.random.default_rng(0)
    launches = tuple(
        Launch(
            Program(student_source, "vector_add.cu", "vector_add"),
            (4, 1, 1),
            (256, 1, 1),
            args=(
                Buffer("a", rng.uniform(0.5, 1.5, n).astype(np.float32)),
                Buffer("b", rng.uniform(0.5, 1.5, n).astype(np.float32)),
                Buffer("c", np.full(n, np.nan, np.float32), is_output=True),
                ScalarArg("n", n),
            ),
        )
        for _ in range(sets)
    )
    return TimingRequest(
        student=launches,
        reference=Program("reference", "vector_add.cu", "vector_add"),
        case={"n": n},
        rtol=1e-6,
        atol=1e-6,
        min_repeats=12,
        budget_s=5,
        flush_bytes=1 << 16,  # the fake flush checks every byte of it
    )


def test_timing_protocol_interleaves_and_measures_a_slower_kernel():
    kernels = {"reference": _vector_add, "slow": lambda cuda, *args: _vector_add(cuda, *args, extra=3)}
    backend = _FakeBackend(kernels)
    timing = gpu_timing.time_case(backend, _request("slow"))
    assert timing.wrong is None
    assert backend.flushes == 2 * (timing.repeats + timing.input_sets)  # before every launch, warm-up's too
    assert timing.reference_ms == 2.0 and timing.student_ms == 4.0 and timing.ratio == 2.0
    assert timing.repeats >= 12 and timing.repeats % 3 == 0 and timing.input_sets == 3
    assert timing.device == "Fake GPU" and timing.floor_ms is None


def test_cuda_failing_while_the_session_uploads_is_the_graders_fault_and_in_a_launch_the_kernels():
    """Until the student's kernel first runs in a session, only the grader has used the GPU: an
    upload or an allocation that fails then (out of memory, a driver refusing a copy) is flagged
    for regrading, never a LaunchFailure written to the student as the kernel's."""
    backend = _FakeBackend({"reference": _vector_add})

    def refused(dest, src):
        raise backend.driver.Error("cuMemcpyHtoD failed: out of memory")

    backend.driver.memcpy_htod = refused
    with pytest.raises(
        GraderCudaFault, match="setting up the timing's input sets on the GPU failed: cuMemcpy"
    ):
        gpu_timing.time_case(backend, _request("reference"))

    calls = itertools.count()

    def crashing(cuda, *args):  # its fault surfaces at a later CUDA call, as on a GPU
        if next(calls) == 2:
            raise cuda.Error("cuEventSynchronize failed: an illegal memory access was encountered")
        _vector_add(cuda, *args)

    with pytest.raises(LaunchFailure, match="an illegal memory access"):
        gpu_timing.time_case(
            _FakeBackend({"reference": _vector_add, "crashing": crashing}), _request("crashing")
        )


def test_timing_protocol_fails_a_kernel_that_replays_its_first_answer():
    kernels = {"reference": _vector_add, "remembering": _remembering()}
    timing = gpu_timing.time_case(_FakeBackend(kernels), _request("remembering"))
    assert timing.wrong.startswith("launch 2 of your kernel (input set 1) gave 1000 outputs that differ")
    evidence = perf.score_timings([timing], full_at=1.2, zero_at=4.0)
    assert evidence.fraction == 0.0


def test_timing_protocol_fails_a_kernel_that_writes_nothing_after_its_first_call():
    calls = itertools.count()

    def lazy(cuda, *args):
        if next(calls) == 0:
            _vector_add(cuda, *args)

    timing = gpu_timing.time_case(_FakeBackend({"reference": _vector_add, "lazy": lazy}), _request("lazy"))
    assert timing.wrong is not None and "1000 outputs" in timing.wrong


def test_a_kernel_that_remembers_answers_by_address_passes_the_output_check():
    """Each input set has buffers of its own (no copy before every launch), so a kernel can replay
    each set's answer by its address, as it could by sampling a value: its outputs are right, and
    what flags its impossible time is the case's physical floor, not this check (known-gaps)."""
    answers = {}

    def by_address(cuda, a, b, c, n):
        if int(a) not in answers:
            _vector_add(cuda, a, b, c, n)
            answers[int(a)] = cuda.view(c, np.float32, int(n)).copy()
        cuda.view(c, np.float32, int(n))[:] = answers[int(a)]

    kernels = {"reference": _vector_add, "by_address": by_address}
    timing = gpu_timing.time_case(_FakeBackend(kernels), _request("by_address"))
    assert timing.wrong is None and timing.student_ms < timing.reference_ms


def test_an_honest_kernel_costs_no_copy_per_launch():
    """Inputs are read where they were uploaded and float32 outputs poisoned by a memset: the
    only copies on the device are each set's pristine inputs and the reference's outputs, made
    once."""
    backend = _FakeBackend({"reference": _vector_add})
    copies = []
    copy = backend.driver.memcpy_dtod_async
    backend.driver.memcpy_dtod_async = lambda *args: copies.append(args) or copy(*args)
    timing = gpu_timing.time_case(backend, _request("reference"))
    assert timing.repeats >= 12 and len(copies) == (2 + 1) * timing.input_sets  # a, b; c


def test_outputs_are_poisoned_again_by_a_memset_where_the_poison_repeats_a_word_else_by_a_copy():
    """NaN in float32 repeats a 32-bit word (a memset); NaN in float64, int64's sentinel and a
    float32 poison that changes after its first word do not (a copy)."""
    mixed = np.full(5, np.nan, np.float32)
    mixed[3] = 1.0
    poisons = {
        "f": np.full(5, np.nan, np.float32),
        "d": np.full(5, np.nan),
        "i": np.full(5, np.iinfo(np.int64).min),
        "m": mixed,
    }
    outputs = [Buffer(name, data, is_output=True) for name, data in poisons.items()]
    launch = Launch(Program("k", "k.cu", "k"), (1, 1, 1), (32, 1, 1), (Buffer("x", np.ones(5)), *outputs))
    request = TimingRequest(student=(launch,), reference=launch.program, case={}, rtol=0.0, atol=0.0)
    backend = _FakeBackend({"k": _vector_add})
    session = gpu_timing._Session(backend, request)
    (input_set,) = session.sets
    assert set(input_set.words) == {"f"}
    for b in outputs:
        backend.driver.view(input_set.working.memory[b.name], np.uint8, b.data.nbytes)[:] = 0  # answers
    input_set.poison_outputs(stream=None)
    for b in outputs:
        got = backend.driver.view(input_set.working.memory[b.name], np.uint8, b.data.nbytes)
        assert got.tobytes() == b.data.tobytes()


def _costing(costs):
    """A vector_add whose n-th call takes ``costs(n)`` ticks of the fake clock, noted in order."""
    taken = []

    def kernel(cuda, *args):
        taken.append(costs(len(taken)))
        _vector_add(cuda, *args, extra=taken[-1])

    return kernel, taken


def _logged(monkeypatch) -> list[tuple[str, int]]:
    """("queue", n) as the session queues its n-th round (the warm-up is the 1st), ("wait", n) as
    the host waits for it."""
    log: list[tuple[str, int]] = []
    queue, wait = gpu_timing._Session._queue, gpu_timing._Session._wait

    def queued(session):
        done = queue(session)
        done.number = session.rounds_run
        log.append(("queue", done.number))
        return done

    monkeypatch.setattr(gpu_timing._Session, "_queue", queued)
    monkeypatch.setattr(
        gpu_timing._Session, "_wait", lambda s, d: log.append(("wait", d.number)) or wait(s, d)
    )
    return log


@pytest.mark.parametrize("in_flight", [1, 2, 3])
def test_the_next_rounds_are_queued_before_the_host_waits_for_one(in_flight, monkeypatch):
    """After the warm-up, the host queues ``rounds_in_flight`` rounds before it waits for the
    first, and one more after each wait, so that the GPU runs a round while the host judges the
    last; at the end it waits for every round it queued. Each launch is timed by events of its
    own round (the student's calls alternate 3 and 5 ticks of the fake clock)."""
    log = _logged(monkeypatch)
    student, taken = _costing(lambda n: 3 + 2 * (n % 2))
    backend = _FakeBackend({"reference": _vector_add, "costing": student})
    session = gpu_timing._Session(
        backend, dataclasses.replace(_request("costing"), rounds_in_flight=in_flight)
    )
    samples, wrong = session.measure()
    assert wrong is None and samples["student"] == [
        float(t + 1) for t in taken[3:]
    ]  # after the warm-up's three
    rounds = session.rounds_run
    ahead = [("queue", r) for r in range(2, 2 + in_flight)]
    steady = [
        step for r in range(2, rounds - in_flight + 1) for step in (("wait", r), ("queue", r + in_flight))
    ]
    tail = [("wait", r) for r in range(rounds - in_flight + 1, rounds + 1)]
    assert log == [("queue", 1), ("wait", 1), *ahead, *steady, *tail]
    assert len(session.free_rounds) == in_flight


def test_a_wrong_launch_is_named_and_the_round_queued_behind_it_set_aside(monkeypatch):
    """The kernel stops writing at its 12th call, in the 3rd timed round (the warm-up is the 1st
    round): the round queued behind it is waited for and not judged, and the student reads
    launch 12."""
    log = _logged(monkeypatch)
    calls = itertools.count()
    backend = _FakeBackend({"reference": _vector_add})
    backend.kernels["stopping"] = lambda cuda, *args: next(calls) < 11 and _vector_add(cuda, *args)
    timing = gpu_timing.time_case(backend, _request("stopping"))
    assert timing.wrong.startswith("launch 12 of your kernel (input set 2)")
    assert log[-3:] == [("queue", 5), ("wait", 4), ("wait", 5)]


def test_a_round_reaches_the_gpu_only_once_the_host_has_queued_all_of_it(monkeypatch):
    """Each round's first command is its gate, queued while the host has released only the rounds
    before it; the host releases the round after its last command (the copy of its counts): the
    GPU cannot reach a launch's start event before the kernel behind it is queued."""
    log: list[tuple] = []
    release = gpu_timing._Session._release
    monkeypatch.setattr(
        gpu_timing._Session, "_release", lambda s, r: log.append(("release", r)) or release(s, r)
    )
    backend = _FakeBackend(
        {"reference": lambda cuda, *args: log.append(("kernel",)) or _vector_add(cuda, *args)}
    )
    gate, copy = backend._gate, backend.driver.memcpy_dtoh_async
    backend._gate = lambda released, r, **launch: log.append(("gate", int(r))) or gate(released, r, **launch)
    backend.driver.memcpy_dtoh_async = lambda *args: log.append(("counts",)) or copy(*args)
    timing = gpu_timing.time_case(backend, _request("reference"))
    rounds = 1 + timing.repeats // 3  # the warm-up's and the timed ones
    assert backend.gates == [(r, r - 1) for r in range(1, rounds + 1)]
    for r in range(1, rounds + 1):
        held = log[log.index(("gate", r)) + 1 : log.index(("release", r))]
        assert held == [("kernel",)] * 6 + [("counts",)]


@pytest.mark.parametrize("sets, in_flight", [(2, 2), (3, 2), (3, 1), (3, 3)])
def test_each_kernel_goes_first_on_every_other_pair_and_no_count_of_rounds_fixes_the_order(
    sets, in_flight, monkeypatch
):
    """Who runs first on each pair: alternating within a round; the round's first pair drawn, so
    that no class of rounds a period of their count makes (every other round, every fourth, the
    rounds of one buffer of events and counts) runs one order for good. On the H200 an order
    turning every round read the reduction's reference 0.998 against itself, one turning every
    second round the same; a drawn order read 1.000."""
    rounds = []  # (the round's buffers, who went first on each pair)
    queue = gpu_timing._Session._queue

    def recorded(session):
        done = queue(session)
        rounds.append((id(done), [done.slots[2 * pair][0] for pair in range(sets)]))
        return done

    monkeypatch.setattr(gpu_timing._Session, "_queue", recorded)
    request = dataclasses.replace(
        _request("reference", sets=sets), rounds_in_flight=in_flight, min_repeats=60
    )
    gpu_timing.time_case(_FakeBackend({"reference": _vector_add}), request)
    timed = rounds[1:]  # after the warm-up
    assert len(timed) >= 20 and len({buffers for buffers, _firsts in timed}) == in_flight
    assert all(firsts[p] != firsts[p + 1] for _buffers, firsts in timed for p in range(sets - 1))
    classes = [timed[phase::period] for period in (1, 2, 3, 4) for phase in range(period)]
    classes += [[r for r in timed if r[0] == buffers] for buffers in {b for b, _firsts in timed}]
    for members in classes:
        assert {firsts[0] for _buffers, firsts in members} == set(gpu_timing.WHO)


def test_the_stop_rule_is_applied_as_the_launches_grow_by_a_sixteenth(monkeypatch):
    """A ratio settled from 1 500 launches on: the rule, applied once the launches grew by a
    sixteenth, finds it within a sixteenth more (and the round in flight), after about 80
    applications instead of one a round (500); again from the start when the session is timed
    again."""
    applied = []

    def settled(student, reference, *rule):
        applied.append(len(student))
        return gpu_timing.SETTLED if len(student) >= 1500 else None

    monkeypatch.setattr(gpu_timing, "stop_reason", settled)
    request = dataclasses.replace(_request("reference"), max_repeats=10_000)
    session = gpu_timing._Session(_FakeBackend({"reference": _vector_add}), request)
    samples, wrong = session.measure()
    assert wrong is None and 1500 <= len(samples["student"]) <= 1500 * 17 // 16 + 2 * 3 and len(applied) < 100
    assert all(b >= a + a // 16 for a, b in itertools.pairwise(applied))
    applied.clear()
    session._timed_rounds()
    assert applied[0] == request.min_repeats


@pytest.mark.parametrize(
    "student_ticks, scored_between, decided",
    [(100, (1.2, 4.0), True), (500, (1.2, 4.0), True), (200, (1.2, 4.0), False), (100, None, False)],
)
def test_the_repeats_end_once_the_ratio_is_decided_outside_the_scored_range(
    student_ticks, scored_between, decided
):
    """Launches spread by about 4 %, never settled to the 0.08 % asked within 300 launches: a
    ratio of 1 or 5 against a score that changes between 1.2 and 4 is decided at the first
    application of the rules (12 launches, and the round then in flight kept), one of 2 is not, nor
    is any ratio without a range."""
    noise = np.random.default_rng(5)
    student, _ = _costing(lambda n: student_ticks + int(noise.integers(0, student_ticks // 10)))
    reference, _ = _costing(lambda n: 100 + int(noise.integers(0, 10)))
    request = dataclasses.replace(_request("student"), max_repeats=300, scored_between=scored_between)
    timing = gpu_timing.time_case(_FakeBackend({"student": student, "reference": reference}), request)
    assert timing.decided == decided and timing.wrong is None
    assert timing.repeats == (12 + 3 if decided else 300)  # with the round in flight at 12
    assert timing.ratio == pytest.approx(student_ticks / 100, rel=0.05)


@pytest.mark.parametrize("in_flight", [1, 2])
def test_no_round_is_queued_past_max_repeats(in_flight):
    """The repeats end at the first multiple of the three sets past max_repeats (21 of 20), the
    rounds in flight counted: none is queued once those timed and queued reach it."""
    backend = _FakeBackend({"reference": _vector_add})
    request = dataclasses.replace(
        _request("reference"), min_repeats=100, max_repeats=20, rounds_in_flight=in_flight
    )
    assert gpu_timing.time_case(backend, request).repeats == 21


def test_the_flush_reads_twice_the_devices_l2_unless_the_request_names_its_size():
    for asked, read in ((None, 2 * _FakeBackend.l2_bytes), (1 << 17, 1 << 17)):
        backend = _FakeBackend({"reference": _vector_add})
        gpu_timing.time_case(backend, dataclasses.replace(_request("reference"), flush_bytes=asked))
        assert backend.flushed_bytes == read


@pytest.mark.parametrize("from_call", [0, 8], ids=["always", "after-the-warm-up"])
def test_a_kernel_that_overwrites_its_input_does_not_corrupt_later_launches(from_call):
    """The reference, run next on the changed inputs, is wrong: the inputs are checked before
    anyone is blamed, and the round runs again on restored ones."""
    calls = itertools.count()

    def clobbering(cuda, a, b, c, n):
        _vector_add(cuda, a, b, c, n)
        if next(calls) >= from_call:
            cuda.view(a, np.float32, int(n))[:] = 7.0

    kernels = {"reference": _vector_add, "clobbering": clobbering}
    timing = gpu_timing.time_case(_FakeBackend(kernels), _request("clobbering"))
    assert timing.wrong is None and timing.ratio == 1.0


def test_a_kernel_that_changes_its_inputs_unseen_in_any_output_is_timed_again_on_restored_ones():
    """From its 10th call the kernel moves a[0] by one ulp, which no output shows (within the
    tolerance): the last check of the inputs sees it, and the session is timed again with every
    set's inputs restored before each launch."""
    drawn, pristine = {}, []

    def nudging(cuda, a, b, c, n):
        first = cuda.view(a, np.float32, int(n))[:1]
        drawn.setdefault(int(a), first[0])
        pristine.append(first[0] == drawn[int(a)])
        _vector_add(cuda, a, b, c, n)
        if len(pristine) >= 10:
            first[0] = np.nextafter(drawn[int(a)], np.float32(2))

    kernels = {"reference": _vector_add, "nudging": nudging}
    timing = gpu_timing.time_case(_FakeBackend(kernels), _request("nudging"))
    assert timing.wrong is None and timing.ratio == 1.0 and not all(pristine)
    assert all(pristine[-(timing.repeats + timing.input_sets) :])  # the warm-up and timed launches


# --- the performance check (checks.performance_check) ----------------------------------


class _Runs:
    """A pipeline stand-in: correct outcomes on the grading backend, and given timings."""

    def __init__(self, backend, timings=(), correct=True):
        self.backend, self.timings_given, self.correct = backend, timings, correct

    def outcomes(self, role, group):
        error = None if self.correct else "wrong"
        return [CaseOutcome(group, 0, {"n": 1 << 24}, 7, self.backend, error=error)]

    def capabilities(self, role):
        return Capabilities(measures_time=self.backend == "gpu")

    def why_untimed(self):
        return None if self.backend == "gpu" else "needs a GPU"

    def same_backend(self, role, other):
        return self.backend != "gpu"

    def correctness_outcomes(self):
        return self.outcomes("grading", "ragged")

    def timings(self, group, scoring=None):
        self.scoring = scoring
        if isinstance(self.timings_given, Exception):
            raise self.timings_given
        return list(self.timings_given)


PERF_ITEM = Item("vector_add", "performance", "perf", 3.0, "speed", metric="time", full_at=1.25, zero_at=4.0)


def test_performance_item_without_gpu_is_not_run_and_flagged():
    result = checks.performance_check(PERF_ITEM, _Runs("emulator"))
    assert result.score == 0.0 and result.regrade and result.not_run == "needs a GPU"
    assert result.output.startswith("not run: needs a GPU")


def test_performance_item_on_gpu_scores_the_timing_with_its_evidence():
    runs = _Runs("gpu", [_timing(2.0, 1.0)])
    result = checks.performance_check(PERF_ITEM, runs)
    # timed to know the score to 0.005 of its 3 points: a ratio to 0.005 * log(4 / 1.25) / 3
    assert runs.scoring.between == (1.25, 4.0) and runs.scoring.spread == pytest.approx(0.0019385, rel=1e-4)
    assert 0.0 < result.score < 3.0 and not result.regrade
    assert result.evidence.ratio.ratio == pytest.approx(2.0)
    assert result.evidence.ratio.cases[0]["device"] == "NVIDIA H200"


def test_performance_item_is_gated_on_correct_answers():
    result = checks.performance_check(PERF_ITEM, _Runs("gpu", [_timing(1.0, 1.0)], correct=False))
    assert result.score == 0.0 and "not awarded" in result.output


@pytest.mark.parametrize("backend", ["emulator", "gpu"])
def test_a_kernel_wrong_on_correctness_scores_0_for_speed_with_no_regrade_on_every_backend(backend):
    result = checks.performance_check(PERF_ITEM, _Runs(backend, [_timing(1.0, 1.0)], correct=False))
    assert (result.score, result.regrade, result.not_run) == (0.0, False, None)
    assert result.output.startswith(
        "not awarded: your kernel is not correct on ragged case n=16777216 (see the correctness "
        "items), so its speed is not measured"
    )


def test_an_impossible_time_is_scored_but_flagged_for_a_ta():
    result = checks.performance_check(PERF_ITEM, _Runs("gpu", [_timing(0.1, 1.0, floor_ms=0.5)]))
    assert result.score == 3.0 and result.regrade


def test_a_timing_crash_fails_the_item_with_its_message():
    runs = _Runs("gpu", LaunchFailure("the kernel crashed on the GPU: illegal address"))
    result = checks.performance_check(PERF_ITEM, runs)
    assert result.score == 0.0 and "illegal address" in result.output and not result.regrade


def test_a_timing_the_backend_cannot_run_is_the_graders_fault_and_flagged_for_a_ta():
    runs = _Runs("gpu", Unsupported("the backend cannot run this launch"))
    result = checks.performance_check(PERF_ITEM, runs)
    assert result.score == 0.0 and result.regrade and "cannot run this launch" in result.output


def test_each_kernel_runs_first_on_every_other_input_set_of_a_round():
    """The kernels as they run (not as the rounds record them): in pairs on one set, the first
    alternating within each round, and either first on a round's first set."""
    order = []

    def recorded(name, kernel):
        def run(cuda, *args):
            order.append(name)
            kernel(cuda, *args)

        return run

    kernels = {"reference": recorded("reference", _vector_add), "student": recorded("student", _vector_add)}
    timing = gpu_timing.time_case(_FakeBackend(kernels), _request("student"))
    pairs = [tuple(order[k : k + 2]) for k in range(3, len(order), 2)]  # after the 3 expected outputs
    assert len(pairs) == timing.repeats + timing.input_sets and set(map(len, map(set, pairs))) == {2}
    rounds = [[first for first, _second in pairs[k : k + 3]] for k in range(0, len(pairs), 3)]
    assert all(r[0] != r[1] != r[2] for r in rounds)
    assert {r[0] for r in rounds} == set(gpu_timing.WHO)


# --- the clocks a timing records (gpu_timing.query_clocks) ------------------------------


class _Device:
    def pci_bus_id(self):
        return "00000000:1B:00.0"


def _with_smi(monkeypatch, tmp_path, script: str):
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\n" + script)
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    return gpu_timing.query_clocks(type("Backend", (), {"device": _Device()})())


def test_the_clocks_are_those_of_the_timings_gpu(monkeypatch, tmp_path):
    lines = (
        "00000000:0A:00.0, 1500, 2619, 1980, 300.1, 40, GPU-0a0a0a0a-1111-2222-3333-444444444444\\n"
        "00000000:1B:00.0, 1980, 2619, 1980, 512.5, 55, GPU-1b1b1b1b-5555-6666-7777-888888888888\\n"
    )
    reading = _with_smi(monkeypatch, tmp_path, f'printf "{lines}"')
    assert reading() == {
        "sm_mhz": "1980",
        "mem_mhz": "2619",
        "max_sm_mhz": "1980",
        "power_w": "512.5",
        "temperature_c": "55",
        "gpu_uuid": "GPU-1b1b1b1b-5555-6666-7777-888888888888",
    }


def test_no_clocks_when_nvidia_smi_fails_or_is_missing(monkeypatch, tmp_path):
    assert _with_smi(monkeypatch, tmp_path, "echo 'NVIDIA-SMI has failed'; exit 9")() == {}
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert gpu_timing.query_clocks(type("Backend", (), {"device": _Device()})())() == {}
