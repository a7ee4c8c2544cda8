"""The GPU timing protocol's output check (``gpu_timing.count_mismatches``), run on the emulator.

It decides, on the device, whether a timed launch's outputs match the reference kernel's;
the same rules as ``compare.compare_output``: NaN never matches, an infinity only itself,
floats within the tolerance, integers exactly (the caller passes atol = rtol = 0 for them)."""

import numpy as np
import pytest

from autograder.backends.emulator import EmulatorBackend
from autograder.backends.gpu_timing import FLUSH_PROGRAM, _compare_program
from autograder.contract import Buffer, Launch, Scalar


def mismatches(got, want, atol, rtol):
    dtype = str(np.asarray(got).dtype)
    args = (
        Buffer("got", np.asarray(got)),
        Buffer("want", np.asarray(want, dtype=dtype)),
        Scalar("n", len(got), "uint64"),
        Scalar("atol", atol, "float64"),
        Scalar("rtol", rtol, "float64"),
        Buffer("bad", np.zeros(1, np.uint32), is_output=True),
    )
    result = EmulatorBackend().launch(Launch(_compare_program(dtype), (1, 1, 1), (32, 1, 1), args))
    return int(result.outputs["bad"][0])


def test_float_outputs_within_the_tolerance_nan_and_infinities():
    want = np.array([1.0, 2.0, 3.0, np.inf, -np.inf, 5.0], np.float32)
    assert mismatches(want.copy(), want, 1e-5, 1e-5) == 0
    got = np.array([1.0 + 1e-7, 2.001, np.nan, -np.inf, np.inf, np.inf], np.float32)
    assert mismatches(got, want, 1e-5, 1e-5) == 5  # 2.001, NaN, the swapped infinities, inf for 5


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint8"])
def test_integer_outputs_compare_exactly(dtype):
    """uint8: the bytes of a timing's inputs, checked against their pristine copies."""
    big = np.iinfo(dtype).max - 1
    want = np.array([big, 7, 9], dtype)
    assert mismatches(np.array([big + 1, 7, 9], dtype), want, 0.0, 0.0) == 1


def test_the_l2_flush_reads_every_byte_of_its_buffer_and_writes_nothing():
    """The flush before each timed launch (``gpu_timing.FLUSH_PROGRAM``) must leave the L2 full
    of clean lines: every 16-byte word of the buffer loaded once, no store, the sink untouched."""
    words = 4096
    flush = np.full(16 * words, 1, np.uint8)
    args = (
        Buffer("flush", flush),
        Scalar("n", words, "uint64"),
        Buffer("sink", np.zeros(1, np.uint32), is_output=True),
    )
    launch = Launch(FLUSH_PROGRAM, (4, 1, 1), (256, 1, 1), args)
    result = EmulatorBackend().launch(launch)
    assert not result.findings and result.outputs["sink"][0] == 0
    totals = result.counters.totals
    assert totals["global_load_bytes"] == flush.nbytes and totals["global_store_bytes"] == 0
