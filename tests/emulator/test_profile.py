"""``autograder profile``'s report: counters by source line with the line's text, and findings; and
its pipeline (``profile_kernel``): the cases, the reference beside them, the resources, the roofline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autograder.backends.emulator import EmulatorBackend
from autograder.contract import Buffer, Scalar
from autograder.course.folder import read_course
from autograder.course.submitted import Submitted
from autograder.emulator.counters import BankModel
from autograder.emulator.profile import profile_data, profile_table
from autograder.profile.kernel_profile import Profiler, profile_kernel

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


# -- profile_kernel: the command's pipeline, a typed result ------------------------------------

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = (ROOT / "reference/vector_add.cu").read_text()


@pytest.fixture(scope="module")
def course():
    return read_course(ROOT)


def profiled(course, text=VECTOR_ADD, name="vector_add.cu", **options):
    kernel = Submitted("vector_add", name, text)
    return profile_kernel(course, kernel, options.pop("asked", ()), 0, EmulatorBackend(), "sm_90", **options)


def test_a_kernel_is_profiled_on_its_first_safety_case_beside_the_reference(course):
    result = profiled(course)
    (case,) = result.cases
    assert (case.case, case.which) == ({"n": 1}, "the first case of the safety group")
    assert case.filename == "vector_add.cu" and case.reference.whence == "the reference kernel"
    ledger = {row.counter: row for row in case.ledger}
    assert ledger["global_load_values"].yours == ledger["global_load_values"].reference == 2
    assert [line.source for line in case.lines] == ["if (i < n) c[i] = a[i] + b[i];"]
    assert result.resources["occupancy"]["threads_per_block"] == 256 and not result.no_resources
    assert result.roofline is None and not result.has_findings


def test_the_roofline_is_the_last_cases_points_and_a_case_asked_for_says_its_group(course):
    result = profiled(course, with_roofline=True)
    assert [case.which.split(":")[0] for case in result.cases] == [
        "the first case of the safety group",
        "the roofline's case",
    ]
    assert result.roofline.title.startswith("vector_add at n=1000003\n(the roofline's case")
    assert [p.label for p in result.roofline.points] == ["student", "reference"]
    assert result.roofline.points[0].flops == 1_000_003 and not result.roofline.note
    (asked,) = profiled(course, asked=({"n": 256},)).cases
    assert asked.which == "aligned case 1"


def test_a_case_names_the_students_own_file_and_its_findings_count(course):
    unguarded = VECTOR_ADD.replace("if (i < n) c[i]", "c[i]")
    result = profiled(course, unguarded, "attempt1.cu", asked=({"n": 1000},))
    assert result.cases[0].filename == "attempt1.cu" and result.has_findings
    assert "attempt1.cu" in result.cases[0].result.findings[0].message


def test_timings_whose_tiles_no_aligned_case_has_give_no_timed_points_and_say_so(course):
    spec = course.specs["matmul_block_tile"]
    source = (ROOT / "reference/matmul_block_tile.cu").read_text()
    profiler = Profiler(course, spec, source, None, 0, EmulatorBackend())
    drawn = profiler.case(spec.cases["safety"][0], "the first case")
    timed = {"case": {**spec.cases["perf"][0], "L": 96}, "work_flops": 1, "student_ms": 1.0}
    shown = profiler.roofline(drawn, timed)
    assert shown.note == "no aligned case of matmul_block_tile has the timed case's tiles: no timed points"
    assert [p.label for p in shown.points] == ["student", "reference"]
