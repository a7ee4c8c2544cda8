"""NVRTC compile messages and headers, as students meet them (no GPU needed)."""

import pytest

from autograder.backends.compiler import compile_ptx
from autograder.contract import CompileError, Program
from autograder.course.policy import ALLOWED_HEADERS

KERNEL = "__global__ void vector_add(float* x, int n) { x[0] = 1.0f; }\n"


@pytest.mark.parametrize("header", sorted(ALLOWED_HEADERS))
def test_every_allowed_header_compiles(header):
    compile_ptx(Program(f"#include <{header}>\n{KERNEL}", "vector_add.cu", "vector_add"))


def test_standard_headers_give_what_kernels_use():
    source = (
        "#include <cstdio>\n#include <cstdint>\n#include <climits>\n#include <cfloat>\n"
        '__global__ void k(float* x, int64_t n) { if (n > INT_MAX) printf("%f\\n", FLT_MAX); }\n'
    )
    assert compile_ptx(Program(source, "k.cu", "k")).lowered_name


def test_a_misnamed_kernel_is_named_in_one_sentence():
    with pytest.raises(CompileError) as e:
        compile_ptx(Program(KERNEL.replace("vector_add", "vectorAdd"), "vector_add.cu", "vector_add"))
    assert e.value.log == (
        "vector_add.cu: no kernel named 'vector_add' is defined; keep the name and "
        "signature the handout gives (__global__ void vector_add(...))"
    )


def test_the_students_own_errors_keep_their_lines():
    with pytest.raises(CompileError) as e:
        compile_ptx(Program("\n" + KERNEL.replace("1.0f", "y"), "vector_add.cu", "vector_add"))
    assert e.value.log.startswith('vector_add.cu(2): error: identifier "y" is undefined')
    assert "__nv_name_map" not in e.value.log
