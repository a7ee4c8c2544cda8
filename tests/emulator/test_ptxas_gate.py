"""What a GPU refuses earns nothing on the emulator either (issue 24): every kernel is
assembled by ptxas for ``sm_90`` in the compile that gives the emulator its PTX, what ptxas
refuses is the student's compile error on the student's line, and a launch the driver
refuses for what the cubin says (``__launch_bounds__``, registers) is the student's launch
failure. No GPU needed."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autograder.backends.compiler import (
    Compiled,
    PtxasRefusal,
    _compile,
    _crashed,
    _in_child,
    _refusal,
    compile_ptx,
)
from autograder.backends.emulator import EmulatorBackend
from autograder.backends.registry import Backends
from autograder.contract import Buffer, CompileError, Launch, LaunchFailure, Program, Scalar
from autograder.course.folder import read_course
from autograder.grading.pipeline import grade_submission
from autograder.grading.resources import kernel_resources
from tests.emulator.helpers import line_of, out

ROOT = Path(__file__).resolve().parents[2]
FILE = "kernel.cu"
ASM = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = threadIdx.x;
    unsigned v = 0;
    STATEMENT
    if (i < n) y[i] = x[i] + v;
}
"""
MOV_FROM_64_BITS = 'asm("mov.u32 %0, %1;" : "=r"(v) : "l"(x));'
LOAD_256_BITS = (
    'unsigned a, b, c, d, e, f, g; asm volatile("ld.global.v8.u32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"'
    ' : "=r"(v), "=r"(a), "=r"(b), "=r"(c), "=r"(d), "=r"(e), "=r"(f), "=r"(g) : "l"(x));'
)
UNKNOWN = 'asm("frobnicate.u32 %0;" : "=r"(v));'


def _refused(statement: str) -> str:
    source = ASM.replace("STATEMENT", statement)
    with pytest.raises(CompileError) as refused:
        EmulatorBackend().compile(Program(source, FILE, "k"))
    assert line_of(source, "asm") == 4
    return refused.value.log


@pytest.mark.parametrize(
    "statement, says",
    [
        (MOV_FROM_64_BITS, "Arguments mismatch for instruction 'mov' (in the PTX: mov.u32 %r"),
        (LOAD_256_BITS, "Feature '256 bit wide load/store' requires .target sm_100 or higher"),
        (UNKNOWN, "Not a name of any known instruction: 'frobnicate' (in the PTX: frobnicate.u32 %r"),
    ],
)
def test_inline_ptx_ptxas_refuses_for_sm_90_is_the_students_compile_error_on_its_line(statement, says):
    log = _refused(statement)
    assert log.startswith(f"{FILE}(4): error: {says}")
    assert (
        "refuses it for sm_90" in log
        and "ptxas fatal" not in log
        and "/" not in log.replace("load/store", "")
    )


def test_the_line_is_the_asm_statements_even_in_an_inlined_device_function():
    source = (
        "__device__ __forceinline__ unsigned bits() {\n"
        '    unsigned v; asm("frobnicate.u32 %0;" : "=r"(v)); return v;\n'
        "}\n"
        'extern "C" __global__ void k(float* y) { y[threadIdx.x] = bits(); }\n'
    )
    with pytest.raises(CompileError) as refused:
        EmulatorBackend().compile(Program(source, FILE, "k"))
    assert refused.value.log.startswith(f"{FILE}(2): error: Not a name of any known instruction")


def test_a_grading_machines_directories_never_reach_the_student():
    log = "ptxas /tmp/tmpxft_0001/kernel.ptx, line 3; error   : Unknown symbol '/opt/cuda/lib/x.h'\n"
    refused = _refusal(log, "", Program("", FILE, "k"), "sm_90")
    assert refused.startswith(f"{FILE}: error: Unknown symbol 'x.h'") and "/tmp" not in refused


def test_unknown_inline_ptx_grades_zero_for_the_student_and_is_not_flagged_for_regrading(tmp_path):
    reference = (ROOT / "reference" / "vector_add.cu").read_text()
    (tmp_path / "vector_add.cu").write_text(
        reference.replace("if (i < n) c[i]", f"unsigned v; {UNKNOWN}\n    if (i < n + v) c[i]")
    )
    graded = _grade(tmp_path)
    assert graded.items and not any(r.regrade or r.score for r in graded.items)
    assert "Not a name of any known instruction: 'frobnicate'" in graded.items[0].output


def test_ptx_and_cubin_come_from_one_compile_that_resources_share():
    program = Program(ASM.replace("STATEMENT", ""), "one_compile.cu", "k")
    before = _compile.cache_info().misses
    compiled = compile_ptx(program)
    assert compiled.ptx.startswith("//") and compiled.cubin.startswith(b"\x7fELF")
    assert kernel_resources(program).registers > 0
    assert _compile.cache_info().misses == before + 1


# ----- launches the driver refuses for what the cubin says ------------------------------
BOUNDED = """extern "C" __global__ void __launch_bounds__(BOUND) copy(const float* x, float* y, int n) {
    int i = threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""
# WORDS=128 keeps 128 floats in registers: ptxas gives it 167 a thread, 5,376 a warp, so a block
# may have 12 warps (384 threads) of the 64 K registers; __launch_bounds__ makes it fit more.
HEAVY = """extern "C" __global__ void BOUNDS heavy(const float* x, float* y, int n) {
    float a[128];
#pragma unroll
    for (int k = 0; k < 128; ++k) a[k] = x[(threadIdx.x + k * 7) % n];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 128; ++k) s += a[k] * a[127 - k] * a[(k * 5) % 128];
    y[threadIdx.x] = s;
}
"""


def _launch(program: Program, threads: int):
    x = np.arange(threads, dtype=np.float32)
    args = (Buffer("x", x), out("y", threads), Scalar("n", threads))
    backend = EmulatorBackend()
    backend.compile(program)
    return backend.launch(Launch(program, (1, 1, 1), (threads, 1, 1), args)), x


def test_a_block_over_the_kernels_launch_bounds_is_refused_as_an_h200_refuses_it():
    program = Program(BOUNDED, FILE, "copy", (("BOUND", "64"),))
    result, x = _launch(program, 64)
    np.testing.assert_array_equal(result.outputs["y"], x)
    with pytest.raises(LaunchFailure) as refused:
        _launch(program, 256)
    assert str(refused.value) == (
        f"{FILE}: kernel copy is declared __launch_bounds__(64), so a GPU runs it in blocks of at "
        "most 64 threads, but the assignment launches it in blocks of 256 threads (256, 1, 1): an "
        "H200 (sm_90) refuses the launch (CUDA error: invalid argument); make the bound at least "
        "the block size the handout gives"
    )


def test_a_block_needing_more_registers_than_a_block_has_is_refused():
    program = Program(HEAVY, FILE, "heavy", (("BOUNDS", ""),))
    assert kernel_resources(program).registers == 167
    _launch(program, 384)
    with pytest.raises(LaunchFailure) as refused:
        _launch(program, 512)
    message = str(refused.value)
    assert message.startswith(f"{FILE}: kernel heavy uses 167 registers a thread (ptxas for sm_90)")
    assert (
        "enough for blocks of at most 384 threads, but the assignment launches it in blocks of 512" in message
    )
    assert "too many resources requested for launch" in message and "__launch_bounds__(512)" in message


def test_launch_bounds_make_ptxas_fit_the_registers_to_the_block():
    _launch(Program(HEAVY, FILE, "heavy", (("BOUNDS", "__launch_bounds__(512)"),)), 512)


def test_a_vector_add_bounded_below_the_handouts_block_earns_no_correctness(tmp_path):
    reference = (ROOT / "reference" / "vector_add.cu").read_text()
    (tmp_path / "vector_add.cu").write_text(
        reference.replace("void vector_add", "void __launch_bounds__(64) vector_add")
    )
    correctness = [r for r in _grade(tmp_path).items if r.item.check == "correctness"]
    assert correctness and not any(r.score or r.regrade for r in correctness)
    assert "kernel vector_add is declared __launch_bounds__(64)" in correctness[0].output


def _grade(submission: Path):
    course = read_course(ROOT)
    spec = course.specs["vector_add"]
    small = dataclasses.replace(spec, cases={**spec.cases, "perf": ({"n": 3000},)})
    course = dataclasses.replace(course, specs={**course.specs, "vector_add": small})
    backends = Backends(EmulatorBackend(), EmulatorBackend())
    return grade_submission(submission, course, backends, seed=3, assignments=["vector_add"])


# ----- a compile that crashes ptxas -------------------------------------------------------
# NVRTC 13.5's ptxas, which runs inside NVRTC's process, segfaults on a st.param to a global
# address: every compile runs in a forked child, and the crash is the student's compile error.
ST_PARAM = 'asm volatile("st.param.u32 [%0], %1;" :: "l"(y), "r"(v) : "memory");'
CRASHES_IN_PROCESS = """import sys
from autograder.contract import Program
from autograder.backends.compiler import _compile_here
_compile_here(Program(sys.stdin.read(), "kernel.cu", "k"), "sm_90")
"""


def test_ptxas_crashing_on_the_kernel_is_the_students_compile_error_not_the_graders_crash():
    log = _refused(ST_PARAM)
    assert log == (
        f"{FILE}(4): error: ptxas, NVIDIA's assembler, crashed on this kernel (signal 11, SIGSEGV); "
        "a GPU's compiler would fail on it too: look at the inline asm on line 4"
    )


def test_the_same_compile_in_this_process_kills_it():
    # what the test above guards against: without the child, the grader dies with ptxas
    source = ASM.replace("STATEMENT", ST_PARAM)
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHES_IN_PROCESS], input=source, text=True, capture_output=True, cwd=ROOT
    )
    assert crashed.returncode == -signal.SIGSEGV, crashed.stderr[-2000:]


def test_a_crashed_compile_of_a_kernel_without_inline_asm_names_the_kernel():
    message = _crashed(signal.SIGABRT, Program("", FILE, "k"), "NVRTC, NVIDIA's CUDA compiler,", "")
    assert message == (
        f"{FILE}: error: NVRTC, NVIDIA's CUDA compiler, crashed on this kernel (signal 6, SIGABRT); "
        "a GPU's compiler would fail on it too: look at the kernel k"
    )


def _refuses(program: Program, arch: str):
    raise PtxasRefusal("kernel.cu(4): error: x")


def test_the_child_reports_a_signal_and_hands_back_results_and_errors_intact():
    program = Program(ASM.replace("STATEMENT", ""), FILE, "k")
    assert _in_child(lambda *_: os.kill(os.getpid(), signal.SIGSEGV), program, "sm_90") == signal.SIGSEGV
    assert _in_child(lambda p, a: Compiled("ptx", b"\x7fELF", p.kernel, a), program, "sm_90") == Compiled(
        "ptx", b"\x7fELF", "k", "sm_90"
    )
    with pytest.raises(PtxasRefusal) as refused:
        _in_child(_refuses, program, "sm_90")
    assert refused.value.log == "kernel.cu(4): error: x"
    assert str(refused.value) == "compilation failed:\nkernel.cu(4): error: x"
    with pytest.raises(ZeroDivisionError):
        _in_child(lambda *_: 1 // 0, program, "sm_90")


def test_a_log_without_ptxas_report_leaves_registers_unchecked(monkeypatch):
    """NVRTC 13.0 (the H200 image's) left ptxas's report out of the starters' logs: the
    emulator then checks the launch bounds only, never fails the grading (measured 2026-12-02)."""
    from autograder.backends import emulator

    program = Program((ROOT / "starter/reduction.cu").read_text(), "reduction.cu", "reduction")
    silent = dataclasses.replace(compile_ptx(program), log="")
    monkeypatch.setattr(emulator, "compile_ptx", lambda p: silent)
    assert emulator.function(program).registers == 0
