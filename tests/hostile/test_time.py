"""An endless loop is reported in seconds, as the student's own failure, and costs only its items."""

import time

from .conftest import assert_sound, reference

SPIN = reference("vector_add").replace(
    "if (i < n) c[i] = a[i] + b[i];",
    "volatile int spin = 1;\n    while (spin) {}\n    if (i < n) c[i] = a[i] + b[i];",
)


def test_an_endless_loop_costs_seconds_and_no_regrade(graded):
    assert "while (spin)" in SPIN
    started = time.monotonic()
    result = graded({"vector_add.cu": SPIN, "window_sum.cu": reference("window_sum")})
    elapsed = time.monotonic() - started
    assert_sound(result)
    assert elapsed < 30 + 10, f"{elapsed:.0f} s"  # the loop's assignment within 30 s, the other graded too
    correctness = result.item("vector_add correctness (aligned)")
    assert correctness["score"] == 0 and "did not finish" in correctness["output"]
    assert result.score("window_sum correctness (ragged)") == 4
