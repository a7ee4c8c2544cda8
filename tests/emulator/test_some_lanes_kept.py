"""A load's or store's pattern of some lanes (``patterns.some_lanes_pattern``) is kept while equal
lanes make requests of one pattern: the same array (a loop's trips) or another array of the same
lanes (the next launch in a chunk kept for its shape, ``chunk.Chunk.acquire``). Its counts are
those lanes' alone, so lanes of another window making requests of the same pattern (the same
addresses relative to the first) get a pattern of their own. Against the same launches, each in a
fresh chunk, with no pattern for requests of some lanes (the path it replaces): outputs, findings
and counters, per line, the same, launch after launch.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar
from autograder.emulator import access, patterns
from autograder.emulator.machine import decoded_kernel

from .helpers import launch, out, reported

WINDOW = r"""
// The lanes of a window [start, start + width) of each block load x and store y and the tile at
// addresses relative to the window's first lane (one pattern wherever the window lies: other
// lanes, other warps), `shift` floats on (where the first address falls in its sector; past the
// end of x and y for some draws: findings); a stride of 0 makes them store one word (a race).
// Then lanes of every third thread read the tile back, and each lane writes how many lanes of
// its block were in the window.
extern "C" __global__ void window(const float* x, float* y, int* c, int start, int width, int stride,
                                  int shift, int n) {
    __shared__ float tile[512];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    tile[t & 511] = 0.0f;
    __syncthreads();
    int in = t >= start && t < start + width;
    if (in) {
        int k = (t - start) * stride + shift;
        float v = x[k % (n + 9)];
        tile[k & 511] = v + t;
        y[k % (n + 9)] = 2.0f * v;
    }
    __syncthreads();
    if (t % 3 == start % 3) y[n + 64 + i] = tile[((t - start) * stride + shift) & 511];
    c[i] = __syncthreads_count(in);
}
"""

BLOCKS = [(1, 100), (2, 96), (1, 256), (3, 48)]  # grid, block: partial warps, ragged blocks


def _draws(rng, block: int, launches: int) -> list[dict]:
    """Launches of one shape: windows at drawn places, some of one width and stride (one pattern
    at other lanes), some of the last launch's window again, at its stride (its pattern at the
    same lanes) or another (the same lanes, another pattern). The last two are always the last
    drawn window again and the same window one place on, so that both paths run whatever is drawn."""
    width, stride = int(rng.integers(1, block)), int(rng.choice([0, 1, 1, 2, 3]))
    draws: list[dict] = []
    for _ in range(launches):
        if draws and rng.random() < 0.4:
            draws.append({**draws[-1], "stride": int(rng.choice([draws[-1]["stride"], 0, 1, 2, 3]))})
            continue
        if rng.random() < 0.3:
            width, stride = int(rng.integers(1, block)), int(rng.choice([0, 1, 1, 2, 3]))
        start = int(rng.integers(0, block - width + 1))
        draws.append({"start": start, "width": width, "stride": stride, "shift": int(rng.integers(0, 40))})
    last = draws[-1]
    moved = (last["start"] + 1) % (block - last["width"] + 1)  # another place: width < block
    return [*draws, dict(last), {**last, "start": moved}]


def _launch(grid: int, block: int, drawn: dict, n: int):
    x = np.linspace(-1.0, 1.0, n).astype(np.float32)
    args = [Buffer("x", x), out("y", n + 64 + grid * block), out("c", grid * block, np.int32)]
    args += [Scalar(name, np.int32(value)) for name, value in [*drawn.items(), ("n", n)]]
    return reported(launch(WINDOW, "window", grid, block, args))


def _kept(monkeypatch) -> Counter:
    """From now on: the requests of some lanes whose pattern was kept for another array of the
    same lanes."""
    same, kept = patterns._same_lanes, Counter()

    def counted(idx, last):
        found = same(idx, last)
        kept["same lanes"] += found
        kept["other lanes"] += not found
        return found

    monkeypatch.setattr(patterns, "_same_lanes", counted)
    return kept


@pytest.mark.parametrize("grid, block", BLOCKS)
def test_patterns_of_some_lanes_kept_across_launches_report_what_fresh_launches_did_without(
    rng, monkeypatch, grid, block
):
    n = int(rng.integers(block // 2, 3 * block))
    draws = _draws(rng, block, 10)
    kept = _kept(monkeypatch)
    decoded_kernel.cache_clear()
    fast = [_launch(grid, block, drawn, n) for drawn in draws]  # one kept chunk serves them all
    monkeypatch.undo()
    monkeypatch.setattr(access, "some_lanes_pattern", lambda idx, a, last: None)
    slow = []
    for drawn in draws:
        decoded_kernel.cache_clear()  # a fresh chunk, no pattern kept
        slow.append(_launch(grid, block, drawn, n))
    monkeypatch.undo()
    decoded_kernel.cache_clear()
    differ = [k for k, (a, b) in enumerate(zip(fast, slow, strict=True)) if a != b]
    assert not differ, f"launches {differ} of {draws} differ"
    assert kept["same lanes"] and kept["other lanes"], kept  # the paths under test ran
