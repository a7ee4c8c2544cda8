"""Race and initialisation checks on vector shared accesses (float4, double): each lane
touches several shadow words at once, per 4-byte word and per byte; the finding names the
first offending word and counts every offending word."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer
from autograder.emulator import shadow

from .helpers import kinds, launch, line_of, out

VEC = r"""
extern "C" __global__ void vec(const float4* x, float4* y, float* z) {
    __shared__ __align__(16) float4 s[64];
#ifdef BYTES
    __shared__ unsigned char pad[64];
    pad[threadIdx.x] = threadIdx.x;  // sub-word access: the shadow is per byte
#endif
    int t = threadIdx.x;
#if defined(WAW)
    s[t / 2] = x[t];  // pairs write one float4
#elif defined(UNINIT)
    if (t < 60) s[t] = x[t];  // leaves s[60..63]
    if (t == 0) reinterpret_cast<float*>(s)[240] = 1.0f;  // but for s[60].x
#else
    s[t] = x[t];  // write
#endif
#ifndef RAW
    __syncthreads();
#endif
#ifdef WAR
    float4 v = s[(t + 4) % 64];  // read first
    s[t] = make_float4(v.w, v.z, v.y, v.x);  // overwrite
    __syncthreads();
    y[t] = s[t];
#else
    y[t] = s[(t + 4) % 64];  // read a neighbour
#endif
#ifdef BYTES
    __syncthreads();
    z[t] = pad[63 - t];
#endif
}
"""


def _run(rng, *defines):
    x = rng.random(256, np.float32)
    args = [Buffer("x", x), out("y", 256), out("z", 64)]
    return launch(VEC, "vec", 1, 64, args, defines=tuple((d, "1") for d in defines)), x


@pytest.mark.parametrize("unit", [None, "BYTES"])
def test_vector_read_after_write_names_first_word_and_counts_words(rng, unit):
    bad, _ = _run(rng, "RAW", *([unit] if unit else []))
    assert kinds(bad) == ["shared_race"]
    (finding,) = bad.findings
    per = 16 if unit else 4  # shadow units per float4
    assert finding.line == line_of(VEC, "read a neighbour")
    assert "read-after-write" in finding.message and f"line {line_of(VEC, '// write')}" in finding.message
    assert finding.thread == (0, 0, 0) and finding.array == "s" and finding.index == 4 * per
    assert finding.bound == 64 * per and finding.others == 64 * per - 1


def test_vector_write_after_read(rng):
    bad, _ = _run(rng, "WAR")
    assert kinds(bad) == ["shared_race"]
    (finding,) = bad.findings
    assert finding.line == line_of(VEC, "// overwrite") and "write-after-read" in finding.message
    assert finding.thread == (4, 0, 0) and finding.index == 16 and finding.others == 255
    assert f"thread (0,0,0) read at line {line_of(VEC, 'read first')}" in finding.message


def test_vector_write_after_read_found_after_the_read_log_is_folded(rng, monkeypatch):
    monkeypatch.setattr(shadow, "LOG_LIMIT", 1)  # every read is folded into per-word readers
    bad, _ = _run(rng, "WAR")
    (finding,) = bad.findings
    assert "write-after-read" in finding.message and finding.thread == (0, 0, 0)
    assert finding.index == 0 and finding.others == 255 and "thread (60,0,0) read" in finding.message


def test_two_lanes_writing_one_float4(rng):
    bad, _ = _run(rng, "WAW")
    assert kinds(bad) == ["shared_race", "uninitialized_shared_read"]  # s[32..63] is never written
    finding = next(f for f in bad.findings if f.kind == "shared_race")
    assert "write-after-write" in finding.message
    assert finding.line == line_of(VEC, "pairs write") and finding.thread == (0, 0, 0)
    assert finding.index == 0 and finding.others == 127
    assert "thread (1,0,0)" in finding.message


def test_uninitialised_vector_read(rng):
    bad, x = _run(rng, "UNINIT")
    (finding,) = bad.findings
    assert finding.kind == "uninitialized_shared_read" and finding.line == line_of(VEC, "read a neighbour")
    assert finding.thread == (56, 0, 0) and finding.index == 241 and finding.others == 14
    y = bad.outputs["y"].reshape(64, 4)
    np.testing.assert_array_equal(y[:56], x.reshape(64, 4)[4:60])


@pytest.mark.parametrize("unit", [None, "BYTES"])
def test_clean_vector_kernel(rng, unit):
    good, x = _run(rng, *([unit] if unit else []))
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"].reshape(64, 4), np.roll(x.reshape(64, 4), -4, axis=0))
    if unit:
        np.testing.assert_array_equal(good.outputs["z"], np.arange(63, -1, -1))


DOUBLES = r"""
extern "C" __global__ void counts(double* y) {
    __shared__ double d[8];
    int t = threadIdx.x;
    if (t < 8) d[t] = 0.0;
    __syncthreads();
    atomicAdd(&d[t % 8], 1.0);
    __syncwarp();
#ifdef BUG
    if (t < 8) d[t] += 1.0;  // no barrier after the atomics
#endif
    __syncthreads();
    if (t < 8) y[t] = d[t];
}
"""


def test_double_atomics_and_a_race_after_them():
    good = launch(DOUBLES, "counts", 1, 64, [out("y", 8, np.float64)])
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"], 8.0)
    assert good.findings == []  # atomics race with nothing, and the barrier orders the read after them
    bad = launch(DOUBLES, "counts", 1, 64, [out("y", 8, np.float64)], defines=(("BUG", "1"),))
    (finding,) = bad.findings  # the plain read-modify-write meets other threads' atomics, unordered
    assert finding.kind == "shared_race" and finding.array == "d"
    assert finding.line == line_of(DOUBLES, "no barrier after the atomics")
    assert "read-after-atomic" in finding.message
    assert f"atomically updated at line {line_of(DOUBLES, 'atomicAdd')}" in finding.message


SYNCWARP = r"""
extern "C" __global__ void swap_pairs(const float2* x, float2* y) {
    __shared__ float2 s[32];
    int t = threadIdx.x;
    s[t] = x[t];
    __syncwarp();
    float2 v = s[t ^ 1];
#ifndef BUG
    __syncwarp();
#endif
    s[t] = v;  // overwrite
    __syncwarp();
    y[t] = s[t];
}
"""


def test_syncwarp_orders_vector_accesses(rng):
    x = rng.random(64, np.float32)
    args = [Buffer("x", x), out("y", 64)]
    good = launch(SYNCWARP, "swap_pairs", 1, 32, args)
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"].reshape(32, 2), x.reshape(32, 2)[np.arange(32) ^ 1])
    bad = launch(SYNCWARP, "swap_pairs", 1, 32, args, defines=(("BUG", "1"),))
    (finding,) = bad.findings
    assert "write-after-read" in finding.message and finding.line == line_of(SYNCWARP, "overwrite")
    assert finding.thread == (1, 0, 0) and finding.index == 2 and finding.others == 63
