"""Interleaved timing on a real GPU: stable ratios, slow kernels land slow, cached answers fail."""

import dataclasses
from pathlib import Path

import pytest

from autograder.backends.gpu import GpuBackend
from autograder.backends.gpu_timing import time_case
from autograder.course.cases import timing_requests
from autograder.course.spec import load_spec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
CASE = {"n": 1 << 24}

# Correct but uncoalesced: thread i handles element (i % 32) * (n / 32) + i / 32 (n % 32 == 0).
STRIDED = """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { int j = (i % 32) * (n / 32) + i / 32; c[j] = a[j] + b[j]; }
}
"""

# Blocks take tickets; blocks of the first launch compute and remember, later ones replay or skip.
REMEMBERING = """
__device__ unsigned int tickets;
__device__ float remembered[1 << 24];
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    __shared__ unsigned int ticket;
    if (threadIdx.x == 0) ticket = atomicAdd(&tickets, 1u);
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (ticket < gridDim.x) { c[i] = a[i] + b[i]; remembered[i] = c[i]; }
    else if (REPLAY) c[i] = remembered[i];
}
"""


@pytest.fixture(scope="module")
def backend():
    gpu = GpuBackend()
    yield gpu
    gpu.close()


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "assignments" / "vector_add")


def _time(backend, spec, student: str, seed: int, budget_s: float = 5.0, **asked):
    sources = {"student": student, "reference": (ROOT / "reference" / "vector_add.cu").read_text()}
    one_case = dataclasses.replace(spec, cases={"perf": (CASE,)})
    request = next(timing_requests(one_case, sources, "perf", seed, time_limit_s=20))
    return time_case(backend, dataclasses.replace(request, budget_s=budget_s, **asked))


def test_reference_against_itself_is_one_with_a_small_spread(backend, spec):
    reference = (ROOT / "reference" / "vector_add.cu").read_text()
    timing = _time(backend, spec, reference, seed=1)
    assert timing.wrong is None
    assert timing.ratio == pytest.approx(1.0, abs=0.02)
    assert timing.repeats >= 30 and timing.input_sets == 3
    assert timing.student_spread < 0.01 and timing.reference_spread < 0.01
    assert timing.device  # clocks are best effort: nvidia-smi may be missing
    if timing.floor_ms is not None:  # a device with measured ceilings
        assert timing.reference_ms > 0.9 * timing.floor_ms


def test_uncoalesced_kernel_is_measured_slower(backend, spec):
    timing = _time(backend, spec, STRIDED, seed=2)
    assert timing.wrong is None
    assert timing.ratio > 1.5


@pytest.mark.parametrize("replay", [0, 1], ids=["right-only-on-first-call", "replays-cached-results"])
def test_a_kernel_that_remembers_across_calls_fails(backend, spec, replay):
    timing = _time(backend, spec, REMEMBERING.replace("REPLAY", str(replay)), seed=3 + replay)
    assert timing.wrong is not None and "of your kernel" in timing.wrong


@pytest.mark.parametrize("scored_between", [(1.2, 4.0), None])
def test_a_ratio_decided_outside_the_scored_range_ends_the_repeats_at_the_first_check(
    backend, spec, scored_between
):
    """The reference against itself, a spread no timing reaches (0): with a score that changes only
    between 1.2 and 4, the ratio is decided at the rules' first application (30 launches, and the
    round then in flight); with none, the repeats run to their cap."""
    reference = (ROOT / "reference" / "vector_add.cu").read_text()
    timing = _time(
        backend, spec, reference, seed=6, target_spread=0.0, max_repeats=120, scored_between=scored_between
    )
    assert timing.wrong is None and timing.decided == (scored_between is not None)
    assert timing.repeats in ((30, 33) if scored_between else (120,))
    assert timing.ratio == pytest.approx(1.0, abs=0.02)
