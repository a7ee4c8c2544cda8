"""Kernels a GPU refuses or aborts must fail the same way in the emulator: ``trap`` and a
failed ``assert`` abort the launch, a local frame over 512 KiB does not compile, and a
branch the emulator cannot resolve is refused rather than taken somewhere else."""

from __future__ import annotations

import re

import numpy as np
import pytest

from autograder.backends.compiler import compile_ptx
from autograder.backends.emulator import EmulatorBackend
from autograder.contract import Buffer, CompileError, Launch, LaunchFailure, Program, Scalar, Unsupported
from autograder.emulator import emulate
from tests.emulator.helpers import launch, line_of, out

FILE = "vector_add.cu"

TRAP = """extern "C" __global__ void fill(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == BAD) TRAP;
    if (i < n) y[i] = 2.0f * x[i];
}
"""

ASSERT = """#include <cassert>
extern "C" __global__ void fill(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(i < n);
    y[i] = 2.0f * x[i];
}
"""

LOCAL = """extern "C" __global__ void fill(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    volatile float scratch[WORDS];
    if (i < n) {
        scratch[(i * 7) % WORDS] = x[i];
        y[i] = 2.0f * scratch[(i * 7) % WORDS];
    }
}
"""


def _fill(rng, source: str, n: int, threads: int, defines=()):
    x = rng.standard_normal(n).astype(np.float32)
    result = launch(
        source,
        "fill",
        (n + threads - 1) // threads,
        threads,
        (Buffer("x", x), out("y", n), Scalar("n", n)),
        defines=defines,
        filename=FILE,
    )
    return x, result


@pytest.mark.parametrize("trap", ["__trap()", 'asm volatile("trap;")'])
def test_a_trap_in_one_thread_aborts_the_launch(rng, trap):
    with pytest.raises(LaunchFailure) as failure:
        _fill(rng, TRAP, 200, 64, (("BAD", "69"), ("TRAP", trap)))
    assert str(failure.value) == (
        f"{FILE}:{line_of(TRAP, 'TRAP;')}: thread (5,0,0) of block (1,0,0) "
        "executed a trap, which aborts the whole kernel on a GPU"
    )


def test_a_trap_no_thread_reaches_changes_nothing(rng):
    x, result = _fill(rng, TRAP, 200, 64, (("BAD", "-1"), ("TRAP", "__trap()")))
    np.testing.assert_array_equal(result.outputs["y"], 2.0 * x)
    assert result.findings == []


def test_a_failed_assert_aborts_the_launch_with_its_text(rng):
    with pytest.raises(LaunchFailure) as failure:
        _fill(rng, ASSERT, 200, 64)  # the last block's threads 8..63 fail it
    message = str(failure.value)
    assert message.startswith(f"{FILE}:{line_of(ASSERT, 'assert(')}: thread (8,0,0) of block (3,0,0) ")
    assert "Assertion `i < n` failed" in message
    assert message.endswith("which aborts the whole kernel on a GPU")


def test_an_assert_that_holds_changes_nothing(rng):
    x, result = _fill(rng, ASSERT, 256, 64)
    np.testing.assert_array_equal(result.outputs["y"], 2.0 * x)
    assert result.findings == []


def test_a_local_frame_over_512_kib_does_not_compile(rng):
    defines = (("WORDS", str((512 << 10) // 4 + 4)),)
    program = Program(LOCAL, FILE, "fill", defines)
    with pytest.raises(CompileError) as failure:
        EmulatorBackend().compile(program)
    assert "524,304 bytes" in str(failure.value) and "512 KiB" in str(failure.value)
    with pytest.raises(CompileError):
        _fill(rng, LOCAL, 64, 32, defines)


def test_a_local_frame_of_512_kib_runs(rng):
    defines = (("WORDS", str((512 << 10) // 4)),)
    EmulatorBackend().compile(Program(LOCAL, FILE, "fill", defines))
    x, result = _fill(rng, LOCAL, 100, 64, defines)
    np.testing.assert_array_equal(result.outputs["y"], 2.0 * x)


VECTOR = """extern "C" __global__ void fill(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


def _patched_launch(rng, replace):
    """Run VECTOR's PTX with its guard's branch rewritten by ``replace``."""
    program = Program(VECTOR, FILE, "fill")
    compiled = compile_ptx(program)
    ptx, count = re.subn(r"@%p\d+ bra\s+(\$L__\w+);", replace, compiled.ptx)
    assert count == 1
    n = 100
    args = (Buffer("x", rng.standard_normal(n).astype(np.float32)), out("y", n), Scalar("n", n))
    return emulate(ptx, compiled.lowered_name, Launch(program, (2, 1, 1), (64, 1, 1), args))


@pytest.mark.parametrize(
    "replace, opcode, why",
    [
        (r"@%p1 bra \1_nowhere;", "bra", "is not a label of the kernel"),
        (r"brx.idx %r1, \1;", "brx.idx", "indirect branches are not emulated"),
    ],
)
def test_a_branch_the_emulator_cannot_resolve_is_refused(rng, replace, opcode, why):
    with pytest.raises(Unsupported) as failure:
        _patched_launch(rng, replace)
    message = str(failure.value)
    assert message.startswith(f"{opcode} is not supported by the emulator ({FILE}:")
    assert why in message


JUMP_TABLE = r"""extern "C" __global__ void pick(float* y, int n) {
    int i = threadIdx.x, v;
    asm volatile("{\n .reg .u32 %%t;\n ts: .branchtargets L0, L1;\n and.b32 %%t, %1, 1;\n"
                 " brx.idx %%t, ts;\n L0: mov.u32 %0, 10;\n bra.uni Ld;\n L1: mov.u32 %0, 20;\n Ld:\n }"
                 : "=r"(v) : "r"(i));
    if (i < n) y[i] = v;
}
"""


def test_an_inline_jump_table_is_refused_at_its_brx():
    with pytest.raises(Unsupported) as failure:
        launch(JUMP_TABLE, "pick", 1, 32, (out("y", 32), Scalar("n", 32)), filename=FILE)
    where = f"{FILE}:{line_of(JUMP_TABLE, 'asm')}"
    assert str(failure.value) == (
        f"brx.idx is not supported by the emulator ({where}): indirect branches are not emulated"
    )
