"""Traffic is bytes whatever the type a kernel reads them as (issue 24, defect 12).

The same 16 bytes read as ``ld.v4.f32`` or as ``ld.v2.u64`` are the same traffic: every
memory counter a rubric can name, and the ledger's rows, count them identically. A kernel
that reads 1.5 times the reference's data as 64-bit pairs reads 1.5 times the values (bytes
over the assignment's element size), not 0.75 times, and loses marks on the traffic item.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autograder.contract import COUNTER_NAMES, Buffer, Capabilities, Counters
from autograder.course.rubric import load_rubric
from autograder.course.spec import load_spec
from autograder.grading.checks import traffic
from autograder.grading.compare import CaseOutcome, OutputComparison
from autograder.grading.ledger import ledger

from .helpers import launch, out

ROOT = Path(__file__).resolve().parents[2]
THREADS = 128

# Each thread reads 16 bytes of shared (SPACE 0) or global (SPACE 1) memory as one float4
# (ld.v4.f32) or one ulonglong2 (ld.v2.u64); with EXTRA, 8 more bytes as one u64: 24 bytes,
# 1.5 times the 16, in two instructions that move 3 "values" of their types against 4 floats.
READS = r"""
extern "C" __global__ void reads(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ __align__(16) float s[4 * 128 + 2 * 128];
    int t = threadIdx.x;
    for (int i = t; i < 6 * 128; i += blockDim.x) s[i] = x[i];
    __syncthreads();
    const float* src = SPACE ? x : s;
#if WIDE
    ulonglong2 v = reinterpret_cast<const ulonglong2*>(src)[t];
    unsigned long long bits = v.x ^ v.y;
#if EXTRA
    bits ^= reinterpret_cast<const unsigned long long*>(src)[2 * 128 + t];
#endif
    y[t] = (float)(bits & 0xffff);
#else
    float4 v = reinterpret_cast<const float4*>(src)[t];
    y[t] = v.x + v.y + v.z + v.w;
#endif
}
"""


def _counters(rng, space: str, wide: bool, extra: bool = False) -> Counters:
    x = rng.random(6 * THREADS, np.float32)
    defines = (("SPACE", str(int(space == "global"))), ("WIDE", str(int(wide))), ("EXTRA", str(int(extra))))
    result = launch(READS, "reads", 1, THREADS, [Buffer("x", x), out("y", THREADS)], defines=defines)
    assert result.findings == []
    return result.counters


MATMUL = load_spec(ROOT / "assignments" / "matmul_block_tile")
RUBRIC = load_rubric(ROOT / "rubric.yaml")
CASE = {"L": 32, "V": 4, "S": 8, "M": 64, "N": 64, "K": 64}


def _item(metric: str):
    """matmul_block_tile's traffic item on ``metric`` (its thresholds, as graded)."""
    return next(
        i for i in RUBRIC.assignments["matmul_block_tile"] if i.check == "traffic" and i.metric == metric
    )


class _Runs:
    """The grading's runs of one case: the student's and the reference's counters, both correct."""

    def __init__(self, student: Counters, reference: Counters):
        self.spec = MATMUL
        self.lists = {"safety": [self._outcome(student)], "reference": [self._outcome(reference)]}

    @staticmethod
    def _outcome(counters: Counters) -> CaseOutcome:
        ok = OutputComparison("C", 10, 0, 0, 0.0, 0.0)
        return CaseOutcome("safety", 0, CASE, 7, "emulator", outputs=(ok,), counters=counters)

    def outcomes(self, role, group):
        return self.lists[role]

    def student_outcomes(self):
        return self.lists["safety"]

    def capabilities(self, role):
        return Capabilities(sees_every_access=True)

    def same_backend(self, role, other):
        return True

    def why_untimed(self):
        return "needs a GPU"


TRAFFIC = [n for n in COUNTER_NAMES if n.startswith(("global_", "shared_"))]


@pytest.mark.parametrize("space", ["shared", "global"])
def test_the_same_bytes_as_v4_f32_or_v2_u64_count_the_same(rng, space):
    floats, pairs = _counters(rng, space, wide=False), _counters(rng, space, wide=True)
    for metric in TRAFFIC:  # every metric a traffic item may name, scored as the grading scores it
        item = replace(_item("shared_load_values"), metric=metric)
        result = traffic(item, _Runs(pairs, floats))
        case = result.evidence.ratio.cases[0]
        assert case["student"] == case["reference"], f"{metric}: {case}"
        assert result.score == item.points
    rows = {r.counter: r for r in ledger(MATMUL, pairs, floats.totals, CASE)}
    assert rows[f"{space}_load_values"].yours == rows[f"{space}_load_values"].reference == 4 * THREADS
    assert all(r.yours == r.reference for name, r in rows.items() if name in TRAFFIC), rows
    nbytes = f"{space}_load_bytes"
    assert floats.totals[nbytes] == pairs.totals[nbytes] == 16 * THREADS


@pytest.mark.parametrize("space", ["shared", "global"])
def test_one_and_a_half_times_the_data_as_u64_pairs_loses_marks(rng, space):
    reference = _counters(rng, space, wide=False)
    student = _counters(rng, space, wide=True, extra=True)
    item = _item(f"{space}_load_values")
    result = traffic(item, _Runs(student, reference))
    case = result.evidence.ratio.cases[0]
    assert result.score < item.points, f"full marks at {case['ratio']:.2f}x: {result.output}"
    assert (case["student"], case["reference"]) == (6 * THREADS, 4 * THREADS)  # in floats: 1.5x
    assert case["ratio"] == pytest.approx(1.5)
    assert student.totals[f"{space}_load_bytes"] == 24 * THREADS  # 1.5 times the reference's 16 a thread
    rows = {r.counter: r for r in ledger(MATMUL, student, reference.totals, CASE)}
    assert rows[f"{space}_load_values"].yours == 6 * THREADS


def test_values_are_bytes_over_the_specs_element_size():
    """The element size defaults from the inputs' dtype; a spec may give it per counter."""
    assert MATMUL.value_bytes("global_load_values") == 4
    tensor = load_spec(ROOT / "assignments" / "gemm_tensor_core")
    assert tensor.value_bytes("global_load_values") == 2  # half inputs
    assert tensor.value_bytes("shared_load_values") == 2
    assert tensor.value_bytes("global_store_values") == 4  # its float output
    rows = {r.counter: r for r in ledger(MATMUL, Counters({"global_load_bytes": 10}), None, CASE)}
    assert rows["global_load_values"].yours == 3  # a part of a value counts as one


def test_recorded_values_without_bytes_are_kept():
    """Counts recorded before bytes were counted (or a backend that counts values only)."""
    rows = {
        r.counter: r
        for r in ledger(MATMUL, Counters({"shared_load_values": 8}), {"shared_load_values": 8}, CASE)
    }
    assert (rows["shared_load_values"].yours, rows["shared_load_values"].reference) == (8, 8)
