"""What an H200 refuses is the student's error, in CUDA's terms (``limits.py``): shared,
constant and ``__device__`` memory over the GPU's limits (or the grader's documented cap),
parameters that do not match the launch, barrier numbers and thread counts ptxas or the GPU
refuses; ``printf`` prints what a GPU prints, ``%n`` included; a call tree too large to
inline is the emulator's limit, named. None of them is a Python exception."""

from __future__ import annotations

import time

import numpy as np
import pytest

from autograder.backends.emulator import EmulatorBackend
from autograder.contract import (
    Buffer,
    CompileError,
    Launch,
    LaunchFailure,
    LaunchTimeout,
    Program,
    Scalar,
    Unsupported,
)
from tests.emulator.helpers import launch, out

FILE = "window_sum.cu"
COPY = """
extern "C" __global__ void copy(const float* x, float* y, int n) {
    DECLARE
    int i = threadIdx.x;
    BODY
    if (i < n) y[i] = x[i] + USE;
}
"""


def _source(declare: str = "", body: str = "", use: str = "0") -> str:
    return COPY.replace("DECLARE", declare).replace("BODY", body).replace("USE", use)


def _launch(source: str, threads: int = 64, shared_bytes: int = 0):
    """Compile as grading does (the gate), then launch once."""
    x = np.arange(threads, dtype=np.float32)
    program = Program(source, FILE, "copy")
    backend = EmulatorBackend()
    backend.compile(program)
    args = (Buffer("x", x), out("y", threads), Scalar("n", threads))
    return backend.launch(Launch(program, (1, 1, 1), (threads, 1, 1), args, shared_bytes)), x


def test_static_shared_memory_over_48_kib_does_not_compile():
    source = _source("__shared__ float s[1 << 28];", "s[i] = x[i]; __syncthreads();", "s[i] * 0")
    with pytest.raises(CompileError) as refused:  # was a MemoryError (1 GiB of shadow)
        _launch(source)
    assert (
        f"{FILE}: error: kernel copy declares 1,073,741,824 bytes of __shared__ memory per block; "
        "an H200 (sm_90) allows at most 49,152 bytes (48 KiB) of static shared memory per block"
    ) in str(refused.value)


def test_48_kib_of_static_shared_memory_is_allowed_and_one_more_word_is_not():
    body = "s[i] = x[i]; __syncthreads();"
    result, x = _launch(_source("__shared__ float s[12288];", body, "s[i] * 0"))
    np.testing.assert_array_equal(result.outputs["y"], x)
    with pytest.raises(CompileError, match="49,156 bytes of __shared__"):
        _launch(_source("__shared__ float s[12289];", body, "s[i] * 0"))


def test_dynamic_shared_memory_over_227_kib_is_refused_at_launch():
    source = _source("extern __shared__ float d[];", "d[i] = x[i]; __syncthreads();", "d[i] * 0")
    result, x = _launch(source, shared_bytes=232_448)  # an H200's opt-in maximum: runs
    np.testing.assert_array_equal(result.outputs["y"], x)
    with pytest.raises(LaunchFailure) as refused:
        _launch(source, shared_bytes=232_449)
    assert "at most 232,448 bytes (227 KiB) of shared memory per block" in str(refused.value)


def test_constant_memory_over_64_kib_does_not_compile():
    source = "__constant__ float c[20000];\n" + _source(use="c[i]")
    with pytest.raises(CompileError, match=r"80,000 bytes of __constant__ memory; a GPU has 65,536"):
        _launch(source)


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        (
            "__device__ float big[1u << 30];",
            "at most 268,435,456 bytes (256 MiB) of them (a limit of this grader",
        ),
        ("__device__ char huge[1ull << 40];", "CUDA_ERROR_OUT_OF_MEMORY"),
    ],
)
def test_device_arrays_over_the_cap_are_refused_without_allocating(declaration, expected):
    name = declaration.split()[2].split("[")[0]
    source = declaration + "\n" + _source(body=f"{name}[i] = x[i];", use=f"{name}[i] * 0")
    started = time.monotonic()
    with pytest.raises(LaunchFailure) as refused:  # was a MemoryError
        _launch(source)
    assert expected in str(refused.value) and "__device__ variables take" in str(refused.value)
    assert time.monotonic() - started < 30


def test_a_large_initialised_device_array_within_the_cap_runs():
    source = "__device__ int table[1 << 16] = {1, 2, 3};\n" + _source(use="table[i % 4]")
    result, x = _launch(source)
    np.testing.assert_array_equal(result.outputs["y"], x + np.tile([1, 2, 3, 0], 16))


@pytest.mark.parametrize("signature", ["const float* x, float* y, int n, int m", "const float* x, float* y"])
def test_a_kernel_whose_parameters_do_not_match_the_launch_fails_to_launch(signature):
    source = f'extern "C" __global__ void copy({signature}) {{ y[threadIdx.x] = x[threadIdx.x]; }}'
    with pytest.raises(LaunchFailure) as refused:  # was Unsupported: flagged for a TA
        _launch(source)
    assert "but the assignment launches it with 3 arguments (x, y, n)" in str(refused.value)


# ----- barriers ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("barrier", "expected"),
    [
        ('asm volatile("bar.sync 20;");', "barrier number 20 is out of range: a block has barriers 0 to 15"),
        ('asm volatile("barrier.sync 16;");', "barrier number 16 is out of range"),
        ('asm volatile("bar.sync 1, 33;");', "a barrier for 33 threads: the number of threads"),
    ],
)
def test_a_barrier_ptxas_refuses_does_not_compile(barrier, expected):
    with pytest.raises(CompileError) as refused:  # was accepted (a whole-block barrier)
        _launch(_source(body=barrier))
    assert f"{FILE}:5: error: {expected}" in str(refused.value)


@pytest.mark.parametrize("barrier", ["bar.sync 15;", "bar.sync 1, 64;", "bar.sync %0;", "bar.sync 1, %1;"])
def test_barriers_a_gpu_runs_still_run(barrier):
    # measured on an H200: a register barrier number of 20 (or 255) runs, a count of 0 too
    body = f'asm volatile("{barrier}" :: "r"(n - 44), "r"(n - 64));'
    result, x = _launch(_source(body=body))
    np.testing.assert_array_equal(result.outputs["y"], x)


@pytest.mark.parametrize(("count", "threads"), [(33, 64), (2048, 64)])
def test_a_barrier_count_a_gpu_cannot_execute_aborts_the_launch(count, threads):
    body = f'asm volatile("bar.sync 1, %0;" :: "r"(n - {threads - count}));'
    with pytest.raises(LaunchFailure) as refused:  # an H200: "an illegal instruction was encountered"
        _launch(_source(body=body), threads)
    assert f"reached a barrier for {count} threads" in str(refused.value)
    assert "illegal instruction" in str(refused.value)


def test_a_barrier_for_more_threads_than_the_block_has_hangs():
    body = 'asm volatile("bar.sync 1, %0;" :: "r"(n + 32));'
    with pytest.raises(LaunchTimeout) as refused:  # an H200 hangs (measured)
        _launch(_source(body=body), 64)
    assert "waits at a barrier for 96 threads, but its block has only 64" in str(refused.value)


# ----- printf -------------------------------------------------------------------------------
PRINTF = r"""
extern "C" __global__ void say(int* k) {
    int n = -1;
    short h = -1;
    printf("A[%d]B[%n]C[%hn]\n", 42, &n, &h);
    printf("D[%a][%A]E[%*d][%.*f]\n", 1.5, 1.5, 5, 42, 2, 3.14159);
    printf("F[%s]G[%p]H[%#o][%hhd][%hd]\n", (const char*)0, (void*)0, 8, 300, 70000);
    printf("K[%zu][%Lf][%5%][%%]\n");
    k[0] = n;
    k[1] = h;
}
"""


def test_printf_prints_what_an_h200_prints():
    result = launch(PRINTF, "say", 1, 1, [out("k", 2, np.int32)])  # %n was a ValueError
    assert result.stdout.splitlines() == [
        "A[42]B[%n]C[%hn]",
        "D[0x1.8p+0][0X1.8P+0]E[   42][%.*f]",
        "F[(null)]G[(nil)]H[010][44][4464]",
        "K[%zu][%Lf][%5%][%]",
    ]
    np.testing.assert_array_equal(result.outputs["k"], [-1, -1])  # %n writes nothing


def test_printf_output_is_bounded():
    source = r'extern "C" __global__ void say(int n) { printf("[%999999999d][%.999999999f]\n", n, 1.0); }'
    result = launch(source, "say", 4, 256, [Scalar("n", 7)])
    lines = result.stdout.splitlines()
    assert len(result.stdout) <= 64 << 10 and len(lines[0]) == 2 * 4096 + 6


def test_a_call_tree_too_large_to_inline_is_the_emulators_limit():
    functions = "".join(
        f"__device__ __noinline__ float f{d}(float a) {{ return f{d + 1}(a) + f{d + 1}(2.0f * a); }}\n"
        for d in range(20, 0, -1)
    )
    source = "__device__ __noinline__ float f21(float a) { return a; }\n" + functions
    source += 'extern "C" __global__ void copy(const float* x, float* y, int n) { y[0] = f1(x[0]); }'
    started = time.monotonic()
    with pytest.raises(Unsupported, match=r"more than 200,000 instructions, more than the emulator runs"):
        _launch(source)
    assert time.monotonic() - started < 60
