"""Each finding kind: a planted bug produces it at the right line; the clean kernel produces none."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar

from .helpers import kinds, launch, line_of, out

OOB = r"""
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef BUG
    y[i] = 2.0f * x[i];  // unguarded
#else
    if (i < n) y[i] = 2.0f * x[i];
#endif
}
"""


def test_out_of_bounds_read_and_write_name_array_index_line(rng):
    n = 1000
    x = rng.random(n, np.float32)
    args = [Buffer("x", x), out("y", n), Scalar("n", n)]
    bad = launch(OOB, "scale", 4, 256, args, defines=(("BUG", "1"),))
    assert kinds(bad) == ["out_of_bounds_read", "out_of_bounds_write"]
    read, write = sorted(bad.findings, key=lambda f: f.kind)
    line = line_of(OOB, "unguarded")
    assert (read.line, read.array, read.index, read.bound, read.others) == (line, "x", 1000, 1000, 23)
    assert (write.array, write.index, write.bound) == ("y", 1000, 1000)
    assert write.thread == (232, 0, 0) and write.block == (3, 0, 0)
    assert "kernel.cu:" in write.message and "y[1000]" in write.message
    np.testing.assert_array_equal(bad.outputs["y"], 2 * x)  # the dropped writes hurt nothing
    assert launch(OOB, "scale", 4, 256, args).findings == []


def test_a_one_element_array_has_one_element(rng):
    args = [Buffer("x", rng.random(1, np.float32)), out("y", 1), Scalar("n", 1)]
    read, write = sorted(launch(OOB, "scale", 1, 32, args, defines=(("BUG", "1"),)).findings, key=str)
    assert "read x[1] past its end (x has 1 element)" in read.message
    assert "(y has 1 element)" in write.message


NEGATIVE = r"""
extern "C" __global__ void shift(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i - 1];  // reads x[-1]
}
"""


def test_read_before_the_start(rng):
    n = 64
    result = launch(
        NEGATIVE, "shift", 1, 64, [Buffer("x", rng.random(n, np.float32)), out("y", n), Scalar("n", n)]
    )
    (finding,) = result.findings
    assert (finding.kind, finding.index, finding.array, finding.thread) == (
        "out_of_bounds_read",
        -1,
        "x",
        (0, 0, 0),
    )
    assert "before its start" in finding.message
    assert np.isnan(result.outputs["y"][0])


SHARED_OOB = r"""
#define B 64
extern "C" __global__ void stencil(const float* x, float* y, int n) {
    __shared__ float tile[B];
    __shared__ float other[B];
    int i = blockIdx.x * B + threadIdx.x;
    tile[threadIdx.x] = x[i];
    other[threadIdx.x] = 0.0f;
    __syncthreads();
#ifdef BUG
    y[i] = tile[threadIdx.x] + tile[threadIdx.x + 1] + other[threadIdx.x];  // halo missing
#else
    y[i] = tile[threadIdx.x] + (threadIdx.x + 1 < B ? tile[threadIdx.x + 1] : 0.0f) + other[threadIdx.x];
#endif
}
"""


def test_shared_out_of_bounds_names_the_source_variable(rng):
    n = 128
    args = [Buffer("x", rng.random(n, np.float32)), out("y", n), Scalar("n", n)]
    bad = launch(SHARED_OOB, "stencil", 2, 64, args, defines=(("BUG", "1"),))
    (finding,) = [f for f in bad.findings if f.kind == "out_of_bounds_read"]
    assert (finding.array, finding.index, finding.bound) == ("tile", 64, 64)
    assert finding.line == line_of(SHARED_OOB, "halo missing")
    assert finding.others == 1  # thread 63 of both blocks
    assert launch(SHARED_OOB, "stencil", 2, 64, args).findings == []


LOCAL_OOB = r"""
extern "C" __global__ void local_array(const int* idx, float* y) {
    float a[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    int i = threadIdx.x;
    volatile float* p = a;
    y[i] = p[idx[i]];  // idx may be 4
}
"""


def test_local_array_out_of_bounds():
    idx = np.array([0, 1, 2, 3, 3, 2, 1, 0], np.int32)
    ok = launch(LOCAL_OOB, "local_array", 1, 8, [Buffer("idx", idx), out("y", 8)])
    assert ok.findings == []
    np.testing.assert_array_equal(ok.outputs["y"], idx + 1)
    idx[5] = 4
    bad = launch(LOCAL_OOB, "local_array", 1, 8, [Buffer("idx", idx), out("y", 8)])
    assert kinds(bad) == ["out_of_bounds_read"]
    assert bad.findings[0].thread == (5, 0, 0)


MISALIGNED = r"""
extern "C" __global__ void misaligned(const char* bytes, float* y) {
    int i = threadIdx.x;
#ifdef BUG
    y[i] = *(const float*)(bytes + 4 * i + 2);  // misaligned
#else
    y[i] = *(const float*)(bytes + 4 * i);
#endif
}
"""


def test_misaligned_access():
    data = np.arange(256, dtype=np.uint8)
    bad = launch(
        MISALIGNED, "misaligned", 1, 32, [Buffer("bytes", data), out("y", 32)], defines=(("BUG", "1"),)
    )
    assert "misaligned_access" in kinds(bad)
    finding = next(f for f in bad.findings if f.kind == "misaligned_access")
    assert finding.line == line_of(MISALIGNED, "// misaligned")
    good = launch(MISALIGNED, "misaligned", 1, 32, [Buffer("bytes", data), out("y", 32)])
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"], data.view(np.float32)[:32])


EARLY_RETURN = r"""
#define B 128
extern "C" __global__ void smooth(const float* x, float* y, int n) {
    __shared__ float s[B];
    int i = blockIdx.x * B + threadIdx.x;
#ifdef RETURN
    if (i >= n) return;  // early return
    s[threadIdx.x] = x[i];
    __syncthreads();  // barrier A
#elif defined(GUARDED)
    if (i < n) {  // guard
        s[threadIdx.x] = x[i];
        __syncthreads();  // barrier in if
    }
#else
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
#endif
    if (i < n) y[i] = s[threadIdx.x] + (threadIdx.x > 0 ? s[threadIdx.x - 1] : 0.0f);
}
"""


@pytest.mark.parametrize(
    ("define", "marker", "exit_marker"),
    [("RETURN", "barrier A", "early return"), ("GUARDED", "barrier in if", "guard")],
)
def test_barrier_divergence_on_ragged_case(rng, define, marker, exit_marker):
    n = 200
    x = rng.random(n, np.float32)
    args = [Buffer("x", x), out("y", n), Scalar("n", n)]
    bad = launch(EARLY_RETURN, "smooth", 2, 128, args, defines=((define, "1"),))
    assert kinds(bad) == ["barrier_divergence"]
    (finding,) = bad.findings
    assert finding.line == line_of(EARLY_RETURN, marker)
    assert finding.block == (1, 0, 0)
    # where the threads left: the return (or the if that skips the barrier), not the closing brace
    assert f"already exited at line {line_of(EARLY_RETURN, exit_marker)};" in finding.message
    expected = x + np.concatenate([[0], x[:-1]]) * (np.arange(n) % 128 > 0)
    np.testing.assert_allclose(bad.outputs["y"], expected, rtol=1e-6)  # released like the hardware
    aligned = launch(
        EARLY_RETURN,
        "smooth",
        2,
        128,
        [Buffer("x", rng.random(256, np.float32)), out("y", 256), Scalar("n", 256)],
        defines=((define, "1"),),
    )
    assert aligned.findings == []
    assert launch(EARLY_RETURN, "smooth", 2, 128, args).findings == []


EARLY_RETURN_BRACES = r"""
extern "C" __global__ void smooth(const float* x, float* y, int n) {
    __shared__ float s[128];
    int i = blockIdx.x * 128 + threadIdx.x;
    if (i >= n) {
        return;
    }
    s[threadIdx.x] = x[i];
    __syncthreads();  // barrier
    y[i] = s[threadIdx.x] + s[(threadIdx.x + 1) % 128];
}
"""

COOPERATIVE_BARRIER_IN_IF = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void smooth(const float* x, float* y, int n) {
    __shared__ float s[128];
    cg::thread_block block = cg::this_thread_block();
    int i = blockIdx.x * 128 + threadIdx.x;
    if (i < n) {  // guard
        s[threadIdx.x] = x[i];
        block.sync();  // barrier
        y[i] = s[threadIdx.x] + s[(threadIdx.x + 1) % 128];
    }
}
"""


@pytest.mark.parametrize(
    ("source", "exit_marker"),
    [(EARLY_RETURN_BRACES, "if (i >= n)"), (COOPERATIVE_BARRIER_IN_IF, "guard")],
    ids=["braced_return", "cooperative_groups_sync_in_if"],
)
def test_barrier_divergence_names_the_barrier_and_where_the_others_left(rng, source, exit_marker):
    """A barrier inlined from a header (cooperative groups: two levels of inlining) is the
    line of its call; the exited threads left at the branch of the return or of the if, which
    has the line of the condition (the compiler gives a braced `return;` no instruction)."""
    n = 200
    args = [Buffer("x", rng.random(n + 128, np.float32)), out("y", n), Scalar("n", n)]
    (finding,) = [
        f for f in launch(source, "smooth", 2, 128, args).findings if f.kind == "barrier_divergence"
    ]
    assert finding.line == line_of(source, "// barrier")
    assert f"already exited at line {line_of(source, exit_marker)};" in finding.message


DIFFERENT_BARRIERS = r"""
extern "C" __global__ void split(float* y) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = t;
    if (t < 32) {
        __syncthreads();  // first barrier
        y[t] = s[63 - t];
    } else {
        __syncthreads();  // second barrier
        y[t] = s[63 - t];
    }
}
"""


def test_threads_at_different_barriers():
    result = launch(DIFFERENT_BARRIERS, "split", 1, 64, [out("y", 64)])
    divergence = [f for f in result.findings if f.kind == "barrier_divergence"]
    assert len(divergence) == 1
    assert divergence[0].line == line_of(DIFFERENT_BARRIERS, "first barrier")
    assert f"line {line_of(DIFFERENT_BARRIERS, 'second barrier')}" in divergence[0].message


DEADLOCK = r"""
extern "C" __global__ void deadlock(float* y) {
    int t = threadIdx.x;
    if (t < 32) asm volatile("bar.sync 1;");  // named barrier 1
    else asm volatile("bar.sync 2;");
    y[t] = t;
}
"""


def test_deadlock():
    result = launch(DEADLOCK, "deadlock", 1, 64, [out("y", 64)])
    assert kinds(result) == ["deadlock"]
    assert result.findings[0].line == line_of(DEADLOCK, "named barrier 1")


RACE = r"""
#define B 64
extern "C" __global__ void reverse(const float* x, float* y) {
    __shared__ float s[B];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * B + t];  // write
#ifndef BUG
    __syncthreads();
#endif
    y[blockIdx.x * B + t] = s[B - 1 - t];  // read
}
"""


def test_read_after_write_race(rng):
    x = rng.random(128, np.float32)
    bad = launch(RACE, "reverse", 2, 64, [Buffer("x", x), out("y", 128)], defines=(("BUG", "1"),))
    assert kinds(bad) == ["shared_race"]
    (finding,) = bad.findings
    assert finding.line == line_of(RACE, "// read")
    assert "read-after-write" in finding.message
    assert f"line {line_of(RACE, '// write')}" in finding.message
    assert finding.array == "s"
    good = launch(RACE, "reverse", 2, 64, [Buffer("x", x), out("y", 128)])
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"], x.reshape(2, 64)[:, ::-1].ravel())


WAR = r"""
extern "C" __global__ void rotate(float* y) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = t;
    __syncthreads();
    float v = s[(t + 1) % 64];  // read neighbour
#ifndef BUG
    __syncthreads();
#endif
    s[t] = v;  // overwrite
    __syncthreads();
    y[t] = s[t];
}
"""


def test_write_after_read_race():
    bad = launch(WAR, "rotate", 1, 64, [out("y", 64)], defines=(("BUG", "1"),))
    assert kinds(bad) == ["shared_race"]
    assert bad.findings[0].line == line_of(WAR, "overwrite")
    assert "write-after-read" in bad.findings[0].message
    assert launch(WAR, "rotate", 1, 64, [out("y", 64)]).findings == []


WAW = r"""
extern "C" __global__ void last_writer(float* y) {
    __shared__ float flag;
#ifdef BUG
    flag = threadIdx.x;  // every thread writes
#else
    if (threadIdx.x == 0) flag = 7.0f;
#endif
    __syncthreads();
    y[threadIdx.x] = flag;
}
"""


def test_write_after_write_race():
    bad = launch(WAW, "last_writer", 1, 64, [out("y", 64)], defines=(("BUG", "1"),))
    assert kinds(bad) == ["shared_race"]
    assert bad.findings[0].line == line_of(WAW, "every thread writes")
    assert "write-after-write" in bad.findings[0].message
    good = launch(WAW, "last_writer", 1, 64, [out("y", 64)])
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"], 7.0)


UNINIT = r"""
extern "C" __global__ void sum_pairs(const float* x, float* y, int n) {
    __shared__ float s[128];
    int t = threadIdx.x;
    if (t < n) s[t] = x[t];
    __syncthreads();
    if (t < 64) y[t] = s[2 * t] + s[2 * t + 1];  // reads s[n..]
}
"""


def test_uninitialized_shared_read(rng):
    x = rng.random(128, np.float32)
    bad = launch(UNINIT, "sum_pairs", 1, 128, [Buffer("x", x), out("y", 64), Scalar("n", 100)])
    assert kinds(bad) == ["uninitialized_shared_read"]
    finding = bad.findings[0]
    assert finding.line == line_of(UNINIT, "reads s[n..]")
    assert finding.array == "s" and finding.index in (100, 101) and finding.thread == (50, 0, 0)
    assert np.isnan(bad.outputs["y"][63])  # garbage, as on a GPU
    good = launch(UNINIT, "sum_pairs", 1, 128, [Buffer("x", x), out("y", 64), Scalar("n", 128)])
    assert good.findings == []


SPIN = r"""
extern "C" __global__ void spin(volatile int* flag, float* y) {
    while (flag[0] == 0) { }  // waits for a flag nobody sets
    y[threadIdx.x] = 1.0f;
}
"""


def test_instruction_budget_ends_an_endless_loop():
    flag = np.zeros(1, np.int32)
    bad = launch(SPIN, "spin", 1, 32, [Buffer("flag", flag), out("y", 32)], budget=100_000)
    assert kinds(bad) == ["instruction_budget"]
    assert bad.findings[0].line == line_of(SPIN, "nobody sets")
    good = launch(SPIN, "spin", 1, 32, [Buffer("flag", flag + 1), out("y", 32)], budget=100_000)
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"], 1)


WARP_SYNC = r"""
extern "C" __global__ void warp_reduce(const float* x, float* y) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    if (t < 32) {
        s[t] += s[t + 32];
        __syncwarp();
        for (int o = 16; o > 0; o >>= 1) {
            float v = t < o ? s[t + o] : 0.0f;
            __syncwarp();
            if (t < o) s[t] += v;
            __syncwarp();
        }
        if (t == 0) y[0] = s[0];
    }
}
"""


def test_syncwarp_orders_shared_accesses_within_a_warp(rng):
    x = rng.random(64, np.float32)
    result = launch(WARP_SYNC, "warp_reduce", 1, 64, [Buffer("x", x), out("y", 1)])
    assert result.findings == []
    np.testing.assert_allclose(result.outputs["y"][0], x.sum(), rtol=1e-5)


BYTES = r"""
extern "C" __global__ void flags(const int* x, int* y) {
    __shared__ unsigned char seen[128];
    int t = threadIdx.x;
    seen[t] = x[t] > 0;  // neighbours share a word
    __syncthreads();
#ifdef BUG
    seen[t ^ 1] = 0;  // a neighbour's byte
#endif
    y[t] = seen[127 - t];
}
"""


def test_byte_arrays_written_by_neighbours_are_not_races(rng):
    x = rng.integers(-5, 5, 128).astype(np.int32)
    good = launch(BYTES, "flags", 1, 128, [Buffer("x", x), out("y", 128, np.int32)])
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["y"], (x > 0)[::-1])
    bad = launch(BYTES, "flags", 1, 128, [Buffer("x", x), out("y", 128, np.int32)], defines=(("BUG", "1"),))
    assert kinds(bad) == ["shared_race"]
    assert "(as bytes)" in bad.findings[0].message
