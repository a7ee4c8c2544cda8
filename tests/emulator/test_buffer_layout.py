"""Where the emulator places a launch's buffers: at random, 4 GiB apart at least, so that no
constant offset from one buffer reaches another (memory.py's docstring says what remains)."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar
from autograder.emulator.memory import ALIGN, GARBAGE, HEAP, MIN_GAP, SMALL_REGION, Draws, Region

from .helpers import kinds, launch, out

DISTANCE = r"""
extern "C" __global__ void distance(const float* a, const float* b, long long* d) {
    d[0] = (const char*)b - (const char*)a;
}
"""


def _distance() -> int:
    args = [Buffer("a", np.ones(4, np.float32)), Buffer("b", np.ones(4, np.float32)), out("d", 1, np.int64)]
    return int(launch(DISTANCE, "distance", 1, 1, args).outputs["d"][0])


def test_the_distance_between_two_buffers_is_large_and_differs_from_launch_to_launch():
    distances = {_distance() for _ in range(4)}
    assert len(distances) == 4
    assert min(abs(d) for d in distances) >= MIN_GAP  # 4 GiB: no offset from one reaches the other


OFFSET = r"""
extern "C" __global__ void offset(const float* a, const float* b, float* c, long long step) {
    int i = threadIdx.x;
    c[i] = a[step + i];  // read
}
"""


def test_a_constant_offset_from_one_buffer_is_a_finding_not_another_buffer():
    # in a fixed layout (buffer k at k << 40), a + 2**38 floats was b, read with no finding
    a, b = np.zeros(32, np.float32), np.arange(32, dtype=np.float32)
    for step in (1 << 38, 2 << 38, -(1 << 38)):
        args = [Buffer("a", a), Buffer("b", b), out("c", 32), Scalar("step", step, "int64")]
        result = launch(OFFSET, "offset", 1, 32, args)
        assert kinds(result) == ["out_of_bounds_read"], step
        assert "inside no buffer" in result.findings[0].message
        assert np.isnan(result.outputs["c"]).all()


def test_an_offset_computed_from_both_pointers_reaches_the_other_buffer_as_on_a_gpu():
    # `a + (b - a)` is b on any GPU: counted and bounds-checked as b's access, no finding
    a, b = np.zeros(32, np.float32), np.arange(32, dtype=np.float32)
    source = OFFSET.replace("a[step + i]", "a[(b - a) + i + step]")
    args = [Buffer("a", a), Buffer("b", b), out("c", 32), Scalar("step", 0, "int64")]
    result = launch(source, "offset", 1, 32, args)
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["c"], b)
    past_b = launch(source, "offset", 1, 32, [*args[:3], Scalar("step", 8, "int64")])
    assert {f.array for f in past_b.findings} == {"b"}


MISALIGNED_AND_WILD = r"""
extern "C" __global__ void both(const char* bytes, float* y, long long step) {
    int i = threadIdx.x;
    y[i] = *(const float*)(bytes + 4 * i + 2) + *(const float*)(bytes + step);
}
"""


def test_findings_read_the_same_on_every_launch_wherever_the_buffers_lie():
    # reports are compared across regrades: no message may show a buffer's random address
    args = [Buffer("bytes", np.zeros(256, np.uint8)), out("y", 32), Scalar("step", 1 << 40, "int64")]
    messages = {
        tuple(sorted(f.message for f in launch(MISALIGNED_AND_WILD, "both", 1, 32, args).findings))
        for _ in range(3)
    }
    assert len(messages) == 1
    assert any("(byte 2 of bytes)" in m for m in next(iter(messages)))


def test_draws_are_uniform_below_their_bound_and_never_repeat_the_pool():
    draws = Draws()
    assert [draws.below(1) for _ in range(3)] == [0, 0, 0]
    small = np.bincount([draws.below(3) for _ in range(3000)], minlength=3)
    assert small.size == 3 and small.min() > 800  # each of 0, 1, 2 about 1000 times
    bound = (HEAP[1] - HEAP[0]) // ALIGN - 17  # about the slots a launch's first buffer may take
    large = [draws.below(bound) for _ in range(400)]  # 50 pools of entropy
    assert max(large) < bound and len(set(large)) == len(large)
    assert 0.35 < np.mean(np.array(large) > bound // 2) < 0.65
    with pytest.raises(ValueError):
        draws.below(0)


@pytest.mark.parametrize(
    "data",
    [
        np.arange(5, dtype=np.float32),
        np.zeros(0, np.int8),
        np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2],  # not contiguous: copied in C order
        np.arange(3, dtype=">i4"),
        np.random.default_rng(0).random(SMALL_REGION // 8 + 3),  # past the small path
    ],
)
def test_a_region_is_its_arrays_bytes_then_garbage_to_a_multiple_of_16(data):
    region = Region("x", data, "argument")
    raw = np.ascontiguousarray(data).tobytes()
    assert region.bytes.dtype == np.uint8 and region.bytes.flags.writeable
    assert region.bytes.size == max(16, -(-len(raw) // 16) * 16)
    assert region.bytes.tobytes() == raw + bytes([GARBAGE]) * (region.bytes.size - len(raw))
    assert region.contents().tobytes() == raw and region.contents().shape == (data.size,)
