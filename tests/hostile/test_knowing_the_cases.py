"""Points for knowing the cases: a kernel that is safe only on the sizes the handout lists.

The spec (public) lists every case's size, so a kernel can guard its loads, or reach its
barrier, only when ``n`` is one of them. Two things take those points away: a finding on any
launch of the grading counts for its check (here, the correctness cases' out-of-bounds
accesses count for the bounds item), and every case group also draws sizes from the secret
seed that no handout lists, so no kernel can recognise a graded case by its size.
"""

from __future__ import annotations

import re

from autograder.course.spec import load_specs

from .conftest import ROOT, assert_sound

WINDOW_SUM = load_specs(ROOT)["window_sum"]
SAFETY_SIZES = sorted({case["n"] for case in WINDOW_SUM.cases["safety"]})
LISTED_SIZES = sorted({case["n"] for cases in WINDOW_SUM.cases.values() for case in cases})

# window_sum through a shared tile, safe (guarded, synchronised) only when listed(n)
KNOWING = r"""
#ifndef BLOCK
#define BLOCK 256
#endif
__device__ bool listed(int n) {
    const int sizes[] = {SIZES};
    for (int k = 0; k < (int)(sizeof(sizes) / sizeof(sizes[0])); ++k)
        if (sizes[k] == n) return true;
    return false;
}

__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    int t = threadIdx.x, base = blockIdx.x * BLOCK;
    bool known = listed(n);
    for (int q = t; q < BLOCK + 4; q += BLOCK)
        if (GUARD || base + q < n + 4) tile[q] = x[base + q];
    if (SYNC) __syncthreads();
    if (GUARD || base + t < n) {
        float sum = 0.0f;
        for (int d = 0; d < 5; ++d) sum += tile[t + d];
        y[base + t] = sum;
    }
}
"""


def knowing(sizes: list[int], guard: str = "false", sync: str = "true") -> str:
    source = KNOWING.replace("SIZES", ", ".join(map(str, sizes)))
    return source.replace("GUARD", guard).replace("SYNC", sync)


def test_a_kernel_guarded_only_on_the_safety_sizes_loses_its_bounds_points(graded):
    result = graded({"window_sum.cu": knowing(SAFETY_SIZES, guard="!known")})
    assert_sound(result)
    bounds = result.item("bounds (safety)")
    assert bounds["score"] == 0, bounds["output"]
    # seen on the correctness cases (ragged n = 33 is no safety size), named by group and case
    assert re.search(r"out of bounds|past", bounds["output"]), bounds["output"]
    assert "ragged T=32, n=33" in bounds["output"], bounds["output"]
    assert result.score("correctness (ragged)") == 4  # the answers are right: only bounds is lost


def test_a_kernel_guarded_on_every_listed_size_loses_its_bounds_points_on_a_drawn_size(graded):
    result = graded({"window_sum.cu": knowing(LISTED_SIZES, guard="!known")})
    assert_sound(result)
    bounds = result.item("bounds (safety)")
    assert bounds["score"] == 0, bounds["output"]
    drawn = [n for n in map(int, re.findall(r"n=(\d+)", bounds["output"])) if n not in LISTED_SIZES]
    assert drawn, f"no drawn size named: {bounds['output']}"


def test_a_kernel_synchronised_only_on_the_listed_sizes_loses_its_barrier_points(graded):
    result = graded({"window_sum.cu": knowing(LISTED_SIZES, sync="known")})
    assert_sound(result)
    barriers = result.item("barriers (safety)")
    assert barriers["score"] == 0, barriers["output"]
    assert "race" in barriers["output"], barriers["output"]
    drawn = [n for n in map(int, re.findall(r"n=(\d+)", barriers["output"])) if n not in LISTED_SIZES]
    assert drawn, f"no drawn size named: {barriers['output']}"


def test_a_kernel_safe_on_every_size_keeps_its_points(graded):
    # the same kernel, guarded and synchronised always: the planted kernels lose points for what
    # they skip, not for the way they are written
    result = graded({"window_sum.cu": knowing(LISTED_SIZES, guard="false", sync="true")})
    assert_sound(result)
    for item in ("correctness (aligned)", "correctness (ragged)", "bounds (safety)", "barriers (safety)"):
        assert result.item(item)["score"] == result.item(item)["max_score"], result.item(item)["output"]
