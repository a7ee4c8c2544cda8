"""A launch's counters summed by line with the rows its kernel worked out once
(``counters.LineRows``) are those the per-launch sum they replace gave (``per_launch_sum``, the
code as it was), on random tallies: lines out of order, instructions of no line, lines that
counted nothing or only events, events of no value, an empty program."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import COUNTER_NAMES, Counters
from autograder.emulator.counters import LineRows, Tally


def per_launch_sum(tally: Tally, line_of: np.ndarray, flops_per_lane: np.ndarray) -> Counters:
    """The sum ``Tally.counters`` did before the rows were worked out once per kernel."""
    lanes, warps = np.array(tally.lanes, np.int64), np.array(tally.warps, np.int64)
    numbers, where = np.unique(line_of, return_inverse=True)
    rows = {line: dict.fromkeys(COUNTER_NAMES, 0) for line in numbers.tolist()}
    for name, per_instruction in (
        ("lane_instructions", lanes),
        ("warp_instructions", warps),
        ("flops", lanes * flops_per_lane),
    ):
        column: np.ndarray = np.zeros(numbers.size, np.int64)
        np.add.at(column, where, per_instruction)
        for line, value in zip(numbers.tolist(), column.tolist(), strict=True):
            rows[line][name] = value
    for i, moved in tally.events.items():
        row = rows[int(line_of[i])]
        for name, value in moved.items():
            row[name] += value
    totals = dict.fromkeys(COUNTER_NAMES, 0)
    for row in rows.values():
        for name, value in row.items():
            totals[name] += value
    by_line = {line: row for line, row in rows.items() if line >= 0 and any(row.values())}
    return Counters(totals=totals, by_line=dict(sorted(by_line.items())))


def random_tally(rng: np.random.Generator, n: int) -> tuple[Tally, np.ndarray, np.ndarray]:
    line_of = rng.choice([-1, 3, 7, 8, 12, 40], n)
    flops = rng.choice([0, 0, 1, 2, 512], n).astype(np.int64)
    tally = Tally(n)
    ran = rng.random(n) < 0.6
    tally.lanes = [int(x) for x in np.where(ran, rng.integers(1, 1 << 20, n), 0)]
    tally.warps = [(lanes + 31) // 32 for lanes in tally.lanes]
    events = ("global_load_bytes", "shared_store_wavefronts", "barriers", "global_store_sectors")
    for i in rng.choice(n, min(n, 4), replace=False).tolist() if n else ():
        for name in rng.choice(events, 2, replace=False).tolist():
            tally.add(i, name, int(rng.choice([0, 1, 4096])))
    return tally, line_of, flops


def as_written(counters: Counters) -> str:
    """The counters with their keys in order, as a digest reads them."""
    return repr((list(counters.totals.items()), [(k, list(v.items())) for k, v in counters.by_line.items()]))


@pytest.mark.parametrize("seed", range(40))
def test_sums_by_the_kernels_rows_are_the_per_launch_sums(seed):
    rng = np.random.default_rng(seed)
    tally, line_of, flops = random_tally(rng, [0, 1, 5, 31, 200][seed % 5])
    want = per_launch_sum(tally, line_of, flops)
    got = tally.counters(LineRows(line_of, flops))
    assert as_written(got) == as_written(want)
