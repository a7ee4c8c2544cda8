"""The TA report's Markdown (grading/report.py): what a TA reads of a timed item."""

import dataclasses

from autograder.contract import Timing
from autograder.grading import performance, report


def _timing(n, student_ms, decided=False, repeats=33):
    return Timing({"n": n}, student_ms, 1.0, 0.003, 0.004, repeats, 3, "NVIDIA H200", decided=decided)


def test_a_timed_items_cases_show_both_medians_the_ratios_error_and_whether_it_was_decided():
    timings = [_timing(1 << 26, 1.02, decided=True), _timing(1000, 2.5, repeats=384), _timing(7, 5.0, True)]
    evidence = performance.score_timings(timings, full_at=1.3, zero_at=3.0)
    assert report._timings_table(evidence) == [
        "",
        "| timed case | student ms | reference ms | ratio | ± | launches each | decided |",
        "|---|---|---|---|---|---|---|",
        "| n=67108864 | 1.02 | 1 | 1.0200 | 0.50 % | 33 | below 1.3x |",
        "| n=1000 | 2.5 | 1 | 2.5000 | 0.50 % | 384 |  |",
        "| n=7 | 5 | 1 | 5.0000 | 0.50 % | 33 | above 3x |",
    ]


def test_a_counted_item_has_no_timings_table():
    counted = performance.score_counters(
        "global_load_values", [performance.CounterRatio({"n": 7}, 14, 7)], full_at=1.1, zero_at=4.0
    )
    assert report._timings_table(counted) == []
    assert report._timings_table(dataclasses.replace(counted, cases=())) == []


def test_a_timing_recorded_without_its_ratios_error_leaves_the_column_empty():
    """A GPU service's answer from before the ratio's error was recorded still makes a report."""
    evidence = performance.score_timings([_timing(7, 2.0)], full_at=1.3, zero_at=3.0)
    older = dataclasses.replace(
        evidence, cases=({k: v for k, v in evidence.cases[0].items() if k != "ratio_spread"},)
    )
    assert report._timings_table(older)[-1] == "| n=7 | 2 | 1 | 2.0000 |  | 33 |  |"
