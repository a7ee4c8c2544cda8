"""The same submission gets the same verdict on every machine and every run of the grader."""

import subprocess
import sys

from autograder.backends import compiler


def test_nvrtc_writes_only_into_buffers_of_its_own():
    """NVRTC writes its log into the buffer it is given; a clean compile's log is one byte, and
    ``b" " * 1`` is CPython's shared ``b" "``: written into, every later f-string lost its spaces."""
    probe = (
        "from autograder.contract import Program\n"
        "from autograder.backends.compiler import compile_ptx\n"
        "compile_ptx(Program('__global__ void k(int* x) { x[0] = 1; }', 'k.cu', 'k'))\n"
        "print(b' '.hex(), f'{1} {2}')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split("\n")[0] == "20 1 2", done.stdout + done.stderr


def test_the_compiler_is_the_pinned_one():
    """pyproject.toml pins NVRTC; CI installs it, so CI compiles with the course's compiler."""
    assert compiler.nvrtc_problem() is None, compiler.nvrtc_problem()
