"""The GPU backend's canary zones, checked without a GPU (pure numpy)."""

import numpy as np
import pytest

from autograder.backends.base import Buffer
from autograder.backends.gpu import CANARY_BYTES, _canary_findings, _contents, _padded, gpu_available


def _written(padded: np.ndarray, itemsize: int, indices: list[int]) -> None:
    """Overwrite elements at ``indices`` (relative to the array's start) with a non-canary byte pattern."""
    for i in indices:
        at = CANARY_BYTES + i * itemsize
        padded[at : at + itemsize] = 0x3F


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_an_untouched_buffer_has_no_findings_and_keeps_its_contents(dtype):
    buffer = Buffer("x", np.random.default_rng().uniform(-9, 9, 1000).astype(dtype))
    padded = _padded(buffer, CANARY_BYTES)
    assert _canary_findings(buffer, padded, CANARY_BYTES) == []
    np.testing.assert_array_equal(_contents(buffer, padded, CANARY_BYTES), buffer.data)


def test_writes_past_the_end_name_the_element_range():
    buffer = Buffer("y", np.full(1000, np.nan, np.float32), is_output=True)
    padded = _padded(buffer, CANARY_BYTES)
    _written(padded, 4, [1000, 1001, 1002, 1003])
    [finding] = _canary_findings(buffer, padded, CANARY_BYTES)
    assert finding.message == "y[1000..1003] written past the end (n = 1000 elements)"
    assert (finding.kind, finding.check, finding.array, finding.index, finding.bound) == (
        "out_of_bounds_write",
        "bounds",
        "y",
        1000,
        1000,
    )


def test_writes_before_the_start_and_scattered_writes():
    buffer = Buffer("y", np.zeros(10, np.float64))
    padded = _padded(buffer, CANARY_BYTES)
    _written(padded, 8, [-3, 10, 20])
    before, after = _canary_findings(buffer, padded, CANARY_BYTES)
    assert before.message == "y[-3] written before the start (n = 10 elements)"
    assert after.message == "y[10..20] written past the end (n = 10 elements; 2 of those elements changed)"


def test_one_changed_byte_counts_as_its_element():
    buffer = Buffer("y", np.zeros(5, np.float32))
    padded = _padded(buffer, CANARY_BYTES)
    padded[CANARY_BYTES + 5 * 4 + 6] = 0  # a byte inside element 6
    [finding] = _canary_findings(buffer, padded, CANARY_BYTES)
    assert finding.message == "y[6] written past the end (n = 5 elements)"


def test_a_one_element_buffer_has_one_element():
    buffer = Buffer("y", np.zeros(1, np.float32))
    padded = _padded(buffer, CANARY_BYTES)
    _written(padded, 4, [1])
    [finding] = _canary_findings(buffer, padded, CANARY_BYTES)
    assert finding.message == "y[1] written past the end (n = 1 element)"


def test_an_empty_buffer_is_all_canary():
    buffer = Buffer("y", np.zeros(0, np.float32))
    padded = _padded(buffer, CANARY_BYTES)
    _written(padded, 4, [0])
    assert [f.message for f in _canary_findings(buffer, padded, CANARY_BYTES)] == [
        "y[0] written past the end (n = 0 elements)"
    ]


def test_gpu_is_unavailable_without_pycuda(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    gpu_available.cache_clear()
    try:
        assert gpu_available() is False
    finally:
        gpu_available.cache_clear()


def test_without_canaries_the_buffer_is_exact():
    buffer = Buffer("y", np.arange(1, 6, dtype=np.float32), is_output=True)
    padded = _padded(buffer, 0)
    assert padded.nbytes == buffer.data.nbytes and _canary_findings(buffer, padded, 0) == []
    np.testing.assert_array_equal(_contents(buffer, padded, 0), buffer.data)
