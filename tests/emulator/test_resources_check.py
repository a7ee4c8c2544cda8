"""Rubric items on what the compiler gives a kernel (``check: resources``): no spills, or an
occupancy floor, judged from ptxas's figures for sm_90 without a GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.cli import main

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ITEMS = """      - {check: correctness, cases: aligned, points: 4}
      - {check: correctness, cases: ragged,  points: 4}
      - {check: bounds,      cases: safety,  points: 3}
      - {check: barriers,    cases: safety,  points: 1}
"""
RESOURCE_ITEMS = """      - {name: no spills, check: resources, cases: safety, points: 1, metric: spills}
      - {name: occupancy, check: resources, cases: safety, points: 1, metric: occupancy, at_least: 0.75}
"""
# vector_add, correct, with 40 live values held to 32 registers by its launch bounds: it spills
SPILLING = r"""
extern "C" __global__ void __launch_bounds__(256, 8)
vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i], acc[40];
    #pragma unroll
    for (int k = 0; k < 40; ++k) acc[k] = x * (k + 1) + y * k;
    #pragma unroll
    for (int k = 0; k < 40; ++k) acc[k] = acc[k] * acc[(k + 17) % 40] + acc[(k + 29) % 40];
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < 40; ++k) s += acc[k];
    c[i] = x + y + (s == 1234.5678f ? 1.0f : 0.0f);  // never 1234.5678 on these inputs
}
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("course")
    for part in ("assignments", "reference", "starter"):
        shutil.copytree(ROOT / part, root / part)
    rubric = (ROOT / "rubric.yaml").read_text()
    start = rubric.index("  vector_add:\n    items:\n") + len("  vector_add:\n    items:\n")
    end = rubric.index("  window_sum:")
    (root / "rubric.yaml").write_text(rubric[:start] + VECTOR_ITEMS + RESOURCE_ITEMS + rubric[end:])
    return root


def graded(course: Path, source: str, tmp_path: Path) -> dict[str, dict]:
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission/vector_add.cu").write_text(source)
    results = tmp_path / "results.json"
    command = ["grade", tmp_path / "submission", "--course", course, "--assignment", "vector_add"]
    command += ["--backend", "emulator", "--results", results, "--report", tmp_path / "report"]
    CliRunner().invoke(main, [str(c) for c in command])
    return {t["name"]: t for t in json.loads(results.read_text())["tests"]}


def test_the_reference_has_no_spills_and_full_occupancy(course, tmp_path):
    tests = graded(course, (ROOT / "reference/vector_add.cu").read_text(), tmp_path)
    assert tests["no spills"]["score"] == 1, tests["no spills"]["output"]
    assert "no spills (12 registers a thread)" in tests["no spills"]["output"]
    assert (
        tests["occupancy"]["score"] == 1
        and "occupancy 100 % (8 blocks of 8 warps an SM" in tests["occupancy"]["output"]
    )


def test_a_kernel_that_spills_loses_the_item_and_is_told_why(course, tmp_path):
    tests = graded(course, SPILLING, tmp_path)
    assert tests["vector_add correctness (ragged)"]["score"] == 4  # it is correct
    assert tests["no spills"]["score"] == 0
    assert (
        "the compiler spilled" in tests["no spills"]["output"]
        and "32 registers" in tests["no spills"]["output"]
    )
    assert "as slow as global memory" in tests["no spills"]["output"]  # the word is explained
    assert tests["occupancy"]["score"] == 1  # 32 registers: still every warp


def test_a_wrong_kernel_earns_no_resource_points(course, tmp_path):
    wrong = (ROOT / "reference/vector_add.cu").read_text().replace("a[i] + b[i]", "a[i] - b[i]")
    tests = graded(course, wrong, tmp_path)
    assert tests["no spills"]["score"] == 0 and "not awarded" in tests["no spills"]["output"]


# vector_add, correct, through 44 000 bytes of shared memory a block: 5 blocks (40 warps) an SM
HOARDING = r"""
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    __shared__ float staged[11000];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    staged[threadIdx.x] = i < n ? a[i] : 0.0f;
    __syncthreads();
    if (i < n) c[i] = staged[threadIdx.x] + b[i];
}
"""


def test_a_kernel_under_the_occupancy_floor_loses_the_item_and_is_told_what_limits_it(course, tmp_path):
    tests = graded(course, HOARDING, tmp_path)
    assert tests["vector_add correctness (ragged)"]["score"] == 4 and tests["no spills"]["score"] == 1
    assert tests["occupancy"]["score"] == 0
    assert "the share of an SM's 64 warp slots" in tests["occupancy"]["output"]
    assert (
        "occupancy 62 % (5 blocks of 8 warps an SM, limited by shared memory), below the 75 % asked"
        in (tests["occupancy"]["output"])
    )
