"""The PyCUDA backend on a real GPU: answers, canaries, refused launches, compile errors, printf.

Crashes spoil CUDA for the whole process, so they are tested through the worker
(``test_gpu_worker.py``), never in the pytest process.
"""

import numpy as np
import pytest
from gpu_kernels import program, vector_add, vector_add_error

from autograder.backends.gpu import GpuBackend
from autograder.backends.registry import select_backend
from autograder.contract import Buffer, CompileError, Launch, LaunchFailure, Scalar

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend():
    gpu = GpuBackend()
    yield gpu
    gpu.close()


@pytest.fixture
def rng():
    return np.random.default_rng()


@pytest.mark.parametrize("n", [1, 10, 1000, 1024, 1_000_003])
def test_vector_add_is_right_on_aligned_and_ragged_n(backend, rng, n):
    launch = vector_add("vector_add", n, rng)
    result = backend.launch(launch)
    assert vector_add_error(launch, result.outputs) <= 1e-6
    assert result.findings == []
    assert result.elapsed_ms > 0
    for name in ("a", "b"):
        np.testing.assert_array_equal(result.outputs[name], launch.args[0 if name == "a" else 1].data)


def test_missing_guard_hits_the_canary_after_c_on_ragged_n(backend, rng):
    result = backend.launch(vector_add("vector_add_unguarded", 1000, rng))
    [finding] = result.findings
    assert finding.kind == "out_of_bounds_write"
    assert finding.message == "c[1000..1023] written past the end (n = 1000 elements)"
    assert (finding.array, finding.index, finding.bound) == ("c", 1000, 1000)


def test_missing_guard_is_invisible_on_aligned_n(backend, rng):
    assert backend.launch(vector_add("vector_add_unguarded", 1024, rng)).findings == []


def test_a_write_before_the_start_is_caught(backend, rng):
    [finding] = backend.launch(vector_add("vector_add_shifted", 1000, rng)).findings
    assert finding.message == "c[-2..-1] written before the start (n = 1000 elements)"
    assert finding.index == -1


def test_a_refused_launch_raises_launch_failure_and_the_backend_goes_on(backend, rng):
    launch = vector_add("vector_add", 1000, rng)
    too_wide = Launch(launch.program, grid=(1, 1, 1), block=(2048, 1, 1), args=launch.args)
    with pytest.raises(LaunchFailure, match=r"vector_add\.cu: the GPU refused the launch"):
        backend.launch(too_wide)
    assert vector_add_error(launch, backend.launch(launch).outputs) <= 1e-6


def test_a_compile_error_names_the_line(backend):
    with pytest.raises(CompileError) as failure:
        backend.compile(program("compile_error"))
    assert 'compile_error.cu(5): error: identifier "j" is undefined' in failure.value.log


def test_printf_is_captured_and_dynamic_shared_memory_above_48_kib_works(backend, rng):
    n = 16 * 1024  # 64 KiB of floats in dynamic shared memory
    x = rng.uniform(-1, 1, n).astype(np.float32)
    launch = Launch(
        program("printf_shared", kernel="stage"),
        grid=(n // 256, 1, 1),
        block=(256, 1, 1),
        args=(Buffer("x", x), Buffer("y", np.full(n, np.nan, np.float32), is_output=True), Scalar("n", n)),
        shared_bytes=4 * n,
    )
    result = backend.launch(launch)
    np.testing.assert_array_equal(result.outputs["y"], x[::-1])
    assert result.stdout == f"staged {n} floats\n"


def test_a_read_past_an_array_computes_the_same_bits_as_on_the_emulator(backend, rng):
    """The emulator is the oracle's model here: the GPU's canary zones hold the contract's
    undefined byte, which the emulator reads outside an allocation, so a kernel reading past an
    array gets the same correctness verdict on both (bench/results/verdicts-gpu.md)."""
    n = 300
    launch = Launch(
        program("read_past", kernel="read_past"),
        grid=(2, 1, 1),
        block=(256, 1, 1),
        args=(
            Buffer("a", rng.uniform(-1, 1, n).astype(np.float32)),
            Buffer("k", rng.integers(-1000, 1000, n).astype(np.int32)),
            Buffer("c", np.zeros(2 * n, np.float32), is_output=True),
            Buffer("d", np.zeros(n, np.int32), is_output=True),
            Scalar("n", n),
        ),
    )
    emulator = select_backend("emulator", 60, 4096)
    try:
        expected = emulator.launch(launch)
    finally:
        emulator.close()
    got = backend.launch(launch)
    assert {f.kind for f in expected.findings} == {"out_of_bounds_read"}
    assert np.isnan(got.outputs["c"]).all() and (got.outputs["d"] == 0).all()
    for name in ("c", "d"):
        np.testing.assert_array_equal(
            got.outputs[name].view(np.uint32), expected.outputs[name].view(np.uint32)
        )
