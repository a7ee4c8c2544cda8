"""Traffic and bounds points a kernel has not earned: loads hidden from the counters
(atomics, inline PTX in a state space that does not hold the data) and buffers reached
through another argument's pointer."""

from __future__ import annotations

from .conftest import assert_sound

TRAFFIC = "traffic (safety)"

# the naive window sum (five global loads per output) whose loads are atomics that add 0
ATOMIC_LOADS = r"""
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float* p = const_cast<float*>(x) + i;
    float sum = 0.0f;
    for (int d = 0; d < 5; ++d) sum += atomicAdd(p + d, 0.0f);
    y[i] = sum;
}
"""

# the same, with atomicOr on the bits (integer atomics return the old word just the same)
ATOMIC_OR_LOADS = r"""
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int* p = reinterpret_cast<int*>(const_cast<float*>(x)) + i;
    float sum = 0.0f;
    for (int d = 0; d < 5; ++d) sum += __int_as_float(atomicOr(p + d, 0));
    y[i] = sum;
}
"""

# the naive window sum whose loads are inline ld.const of the global array
CONSTANT_SPACE_LOADS = r"""
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = 0.0f;
    for (int d = 0; d < 5; ++d) {
        float v;
        asm volatile("ld.const.f32 %0, [%1];" : "=f"(v) : "l"(x + i + d));
        sum += v;
    }
    y[i] = sum;
}
"""

# vector_add that reads b through a: the offset between the two buffers, learnt once
B_THROUGH_A = r"""
__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const long long b_minus_a = 1LL << 38;  // in floats: a distance learnt from one launch
    if (i < n) c[i] = a[i] + a[b_minus_a + i];
}
"""


def test_loads_through_atomic_add_of_zero_earn_no_traffic_points(graded):
    result = graded({"window_sum.cu": ATOMIC_LOADS})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 4
    assert result.score(TRAFFIC) == 0, result.item(TRAFFIC)["output"]


def test_loads_through_atomic_or_earn_no_traffic_points(graded):
    result = graded({"window_sum.cu": ATOMIC_OR_LOADS})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 4
    assert result.score(TRAFFIC) == 0, result.item(TRAFFIC)["output"]


def test_loads_of_a_global_array_through_the_constant_space_are_refused(graded):
    # a GPU's ld.const reads the constant bank at that address: garbage, not x
    result = graded({"window_sum.cu": CONSTANT_SPACE_LOADS})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 0
    assert result.score(TRAFFIC) == 0
    assert "constant state space" in result.item("bounds (safety)")["output"]


# the same read, whose value is used only where it is right: correct, but the access stays
B_THROUGH_A_CHECKED = B_THROUGH_A.replace(
    "c[i] = a[i] + a[b_minus_a + i];",
    "{ float v = a[b_minus_a + i]; c[i] = a[i] + (v == b[i] ? v : b[i]); }",
)


def test_reading_one_argument_through_another_loses_the_bounds_item(graded):
    result = graded({"vector_add.cu": B_THROUGH_A})
    assert_sound(result)
    assert result.score("bounds (safety)") == 0, result.item("bounds (safety)")["output"]


def test_the_access_through_another_argument_is_itself_a_bounds_finding(graded):
    result = graded({"vector_add.cu": B_THROUGH_A_CHECKED})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 4
    bounds = result.item("bounds (safety)")
    assert bounds["score"] == 0 and "inside no buffer" in bounds["output"], bounds["output"]
