"""A chunk of more than ``patterns.PATTERN_LANES`` lanes keeps the pattern of each load's and
store's last request (``patterns.pattern`` with ``last``), and patterns are memoised for the
process by their ends, compared whole (``patterns._large``): a loop that moves a request's
first address but not its pattern has its bounds, alignment, sectors, wavefronts and shadow
spans from the pattern, as a small chunk's have; a shared request keeps where its last addresses
landed (``access.Access.resolve``): a tile read at the same addresses trip after trip. A load
or store of some lanes keeps its last pattern while the same lanes make requests of it
(``patterns.some_lanes_pattern``).
Against the same launches with none of these (the paths they replace): outputs, findings and
counters, per line, the same.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from autograder.backends.compiler import compile_ptx
from autograder.contract import Buffer, Program, Scalar
from autograder.emulator import access, patterns
from autograder.emulator.machine import decoded_kernel

from .helpers import launch, out, reported

STRIDES = r"""
// Each trip reads x at a pattern that stays (a stride a lane), then one that alternates with
// the trip, its first address moving by `step` floats (some trips in one sector, some across
// two; the last trips may read past x), then one whose ends stay and whose middle moves (block
// 1's lanes: `moved`); the tile is filled at a drawn stride (bank conflicts, two lanes of a
// block on one word: a race; words no lane wrote: uninitialised reads), then read at a pattern
// that stays and at the same words every trip; only lanes below `active` run the loop.
extern "C" __global__ void strides(const float* x, const int* moved, float* y, int stride, int step,
                                   int trips, int spread, int n, int active) {
    __shared__ float tile[512];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    tile[(t * spread) & 511] = x[i % n];
    tile[(t * spread + 256) & 511] = x[(i + 7) % n];
    __syncthreads();
    float s = 0.0f;
    for (int k = 0; i < active && k < trips; ++k) {
        s += x[t * stride + k * step];
        s += x[t * (1 + (k & 1)) + blockIdx.x * step];
        s += x[t + k * moved[i]];
        s += tile[(t * stride + k) & 511];
        s += tile[(t * spread + (k >> 8)) & 511];
        if (t >= 4 * k && t < 4 * k + 64) s += x[t - 4 * k];  // one pattern, other lanes, warps
    }
    y[i] = s;
}
"""


def _draw(rng, blocks: int) -> list:
    threads = 256
    n = int(rng.integers(3000, 6000))
    stride = int(rng.choice([1, 1, 2, 3, 8, 33]))
    step = int(rng.integers(1, 40))
    trips = int(rng.integers(2, 7))
    spread = int(rng.choice([1, 2, 3, 4]))
    lanes = blocks * threads
    active = lanes if blocks == 20 else int(rng.integers(lanes // 3, lanes))  # some lanes loop
    x = rng.standard_normal(n).astype(np.float32)
    moved = (np.arange(lanes) // threads == 1).astype(np.int32)
    args = [Buffer("x", x), Buffer("moved", moved), out("y", lanes)]
    drawn = [("stride", stride), ("step", step), ("trips", trips), ("spread", spread), ("n", n)]
    args += [Scalar(name, np.int32(v)) for name, v in [*drawn, ("active", active)]]
    return [blocks, threads, args]


def _before(monkeypatch) -> None:
    """The paths replaced: no pattern and nothing resolved for a request of more lanes than
    ``PATTERN_LANES``, no pattern for a request of some lanes."""
    kept, resolve = access.pattern, access.Access.resolve
    monkeypatch.setattr(
        access, "pattern", lambda a, last=None: None if a.size > patterns.PATTERN_LANES else kept(a, last)
    )
    monkeypatch.setattr(
        access.Access,
        "resolve",
        lambda self, a, *rest: None if a.size > patterns.PATTERN_LANES else resolve(self, a, *rest),
    )
    monkeypatch.setattr(access, "some_lanes_pattern", lambda idx, a, last: None)


def _seen(monkeypatch) -> Counter:
    """From now on: the requests of large chunks that got a pattern, that were resolved, and
    the requests of some lanes that got one."""
    kept, resolve, some, seen = access.pattern, access.Access.resolve, access.some_lanes_pattern, Counter()

    def counted(a, last=None):
        found = kept(a, last)
        seen["pattern"] += found is not None and a.size > patterns.PATTERN_LANES
        return found

    def resolved(self, a, *rest):
        found = resolve(self, a, *rest)
        seen["resolved"] += found is not None and a.size > patterns.PATTERN_LANES
        return found

    def some_lanes(idx, a, last):
        found = some(idx, a, last)
        seen["some lanes"] += found is not None
        return found

    monkeypatch.setattr(access, "pattern", counted)
    monkeypatch.setattr(access.Access, "resolve", resolved)
    monkeypatch.setattr(access, "some_lanes_pattern", some_lanes)
    return seen


@pytest.mark.parametrize("seed", range(6))
def test_kept_patterns_of_large_chunks_and_some_lanes_report_what_they_did_without(rng, monkeypatch, seed):
    compile_ptx(Program(STRIDES, "kernel.cu", "strides"))
    ran: Counter = Counter()
    for blocks in (4, 12, 20):  # a small chunk, then large ones
        blocks, threads, args = _draw(rng, blocks)
        seen = _seen(monkeypatch)
        fast = reported(launch(STRIDES, "strides", blocks, threads, args))
        ran.update(seen)
        monkeypatch.undo()
        decoded_kernel.cache_clear()
        _before(monkeypatch)
        slow = reported(launch(STRIDES, "strides", blocks, threads, args))
        monkeypatch.undo()
        decoded_kernel.cache_clear()
        assert fast == slow
    assert ran["pattern"] and ran["resolved"] and ran["some lanes"]  # the paths under test ran
