"""``autograder profile``'s report: counters by source line with the line's text, and findings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar
from autograder.emulator.counters import BankModel
from autograder.emulator.profile import profile_data, profile_table

from .helpers import launch, line_of, out
from .test_counters import COLUMN
from .test_findings import OOB


def test_table_shows_each_line_with_its_source_and_conflicts(rng):
    x = Buffer("x", rng.random(1024, np.float32))
    result = launch(COLUMN, "column", 1, (32, 32), [x, out("y", 1024)])
    table = profile_table(result, COLUMN, "kernel.cu")
    row = next(r for r in table.splitlines() if "column read" in r)
    assert row.split()[0] == str(line_of(COLUMN, "column read"))
    assert "1,024 (+992)" in row
    assert "No findings." in table


def test_json_report_carries_findings(rng):
    n = 100
    x = Buffer("x", rng.random(n, np.float32))
    result = launch(OOB, "scale", 1, 128, [x, out("y", n), Scalar("n", n)], defines=(("BUG", "1"),))
    data = json.loads(json.dumps(profile_data(result, OOB, "kernel.cu")))
    assert {f["kind"] for f in data["findings"]} == {"out_of_bounds_read", "out_of_bounds_write"}
    assert data["totals"]["global_load_values"] == 128  # out-of-bounds loads count too
    assert any("unguarded" in r["source"] for r in data["lines"])
    assert "out_of_bounds_write" in profile_table(result, OOB, "kernel.cu")


def direct_wavefronts(warps: np.ndarray, words: np.ndarray, per_lane: int = 1) -> tuple[int, int]:
    """(wavefronts, minimum) counted warp by warp, word by word."""
    expected = expected_min = 0
    for w in np.unique(warps):
        distinct = np.unique((words[warps == w][:, None] + np.arange(per_lane)).ravel())
        expected += np.bincount(distinct % 32, minlength=32).max()
        expected_min += (distinct.size + 31) // 32
    return expected, expected_min


def test_wavefronts_of_partial_warps_match_a_direct_count(rng):
    model = BankModel()
    for _ in range(20):
        lanes = np.sort(rng.choice(128, rng.integers(1, 128), replace=False))
        words = rng.integers(0, 96, lanes.size)
        warps = lanes // 32
        assert model.wavefronts(warps, words, False) == direct_wavefronts(warps, words)


@pytest.mark.parametrize("n_warps", [2, 16, 17, 64])
@pytest.mark.parametrize("per_lane", [1, 2, 4])
def test_wavefronts_of_full_warps_with_different_patterns_match_a_direct_count(rng, n_warps, per_lane):
    model = BankModel()
    warps = np.repeat(np.arange(n_warps), 32)
    for _ in range(5):
        words = rng.integers(0, 200, warps.size) * per_lane  # each warp its own pattern
        expected = direct_wavefronts(warps, words, per_lane)
        assert model.wavefronts(warps, words, True, per_lane) == expected
