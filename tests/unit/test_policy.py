"""The source policy: one UTF-8 file that includes only CUDA's and C++'s own headers.

Each hostile spelling below is a way to make NVRTC read a file of the grading machine (the
reference solutions live beside the submission); each must be refused with its line."""

from pathlib import Path

import pytest

from autograder.course.policy import MAX_SOURCE_BYTES, include_problem, read_source

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "__global__ void k(float* x) { x[0] = 1.0f; }\n"

HOSTILE = {
    "absolute path": ('#include "/autograder/source/reference/window_sum.cu"\n', 1),
    "angle brackets, absolute": ("#include </etc/passwd>\n", 1),
    "relative path": ('\n#include "../reference/window_sum.cu"\n', 2),
    "unknown system header": ("#include <fstream>\n", 1),
    "macro-expanded": ('#define F "/etc/passwd"\n#include F\n', 2),
    "digraph": ('%:include "/etc/passwd"\n', 1),
    "spaces after the hash": ('  #   include "/etc/passwd"\n', 1),
    "continued directive": ('#inc\\\nlude "/etc/passwd"\n', 1),
    "include_next": ("#include_next <stdio.h>\n", 1),
    "after a comment on its line": ('/* note */ #include "/etc/passwd"\n', 1),
    "after a string holding a comment opener": ('const char* s = "/*";\n#include "/etc/passwd"\n// */\n', 2),
    "after a raw string holding a quote": ('auto s = R"x(a"b /*)x";\n#include "/etc/passwd"\n// */\n', 2),
    # each below got a file past NVRTC 13.5 and the policy as it was (tried 2026-11-29)
    "after a digit separator and a quote in a string": (
        'int a = 1\'0; const char* s = "\'/*";\n#include "/etc/passwd"\n// */\n',
        2,
    ),
    "after a form feed": ('\f#include "/etc/passwd"\n', 1),
    "after a vertical tab": ('\v#include "/etc/passwd"\n', 1),
    "a comment holding a newline after the hash": ('\n#/*\n*/include "/etc/passwd"\n', 2),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_includes_are_refused_with_their_line(name):
    prefix, line = HOSTILE[name]
    problem = include_problem(prefix + KERNEL, "k.cu")
    assert problem is not None and problem.startswith(f"k.cu:{line}: ")
    assert "may include only" in problem
    assert "include" in problem.split(" is not allowed")[0]  # the student sees what was refused


ALLOWED = {
    "the course's headers": "#include <cuda_fp16.h>\n#include <mma.h>\n",
    "an include inside a block comment": '/*\n#include "/etc/passwd"\n*/\n',
    "an include after a line comment": '// #include "/etc/passwd"\n',
    "an include continued into a line comment": '// see \\\n#include "/etc/passwd"\n',
    "an include inside a raw string": 'auto s = R"(\n#include "/etc/passwd"\n)";\n',
}


@pytest.mark.parametrize("name", ALLOWED)
def test_harmless_sources_pass(name):
    assert include_problem(ALLOWED[name] + KERNEL, "k.cu") is None


COURSE_KERNELS = sorted((ROOT / "reference").glob("*.cu")) + sorted((ROOT / "starter").glob("*.cu"))


@pytest.mark.parametrize("path", COURSE_KERNELS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_course_kernels_pass(path):
    assert read_source(path) == (path.read_text(), None)


def test_size_encoding_and_absence_are_reported(tmp_path):
    path = tmp_path / "vector_add.cu"
    assert read_source(path)[1] == "vector_add.cu was not submitted"
    path.write_bytes(b"\xff\xfe" + KERNEL.encode())
    assert "not UTF-8" in read_source(path)[1]
    path.write_bytes(b" " * (MAX_SOURCE_BYTES + 1))
    assert "larger than the limit" in read_source(path)[1]


def test_a_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "vector_add.cu"
    path.write_bytes(b"\xef\xbb\xbf" + KERNEL.encode())
    assert read_source(path) == (KERNEL, None)


def test_a_huge_file_is_never_read_past_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "vector_add.cu"
    with path.open("wb") as sparse:  # 3 GB that take no disk
        sparse.truncate(3 << 30)
    read = []
    real_open = Path.open

    def recording_open(self, *args, **kwargs):
        file = real_open(self, *args, **kwargs)
        real_read = file.read
        file.read = lambda *size: read.append(len(data := real_read(*size))) or data
        return file

    monkeypatch.setattr(Path, "open", recording_open)
    assert "larger than the limit" in read_source(path)[1]
    assert 0 < sum(read) <= MAX_SOURCE_BYTES + 1


def test_an_unreadable_file_is_its_own_problem(tmp_path, monkeypatch):
    path = tmp_path / "vector_add.cu"
    path.write_text(KERNEL)

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", denied)
    assert read_source(path) == ("", "vector_add.cu could not be read (Permission denied); submit it again")


def test_has_include_is_refused_like_an_include():
    source = "#if __has_include(</autograder/source/reference/vector_add.cu>)\n#endif\n" + KERNEL
    assert include_problem(source, "v.cu").startswith("v.cu:1: '__has_include' is not allowed")
    assert include_problem('const char* s = "__has_include";\n' + KERNEL, "v.cu") is None


def test_a_symbolic_link_is_refused_not_followed(tmp_path):
    # a zip can carry a link to the reference solution beside the submission
    secret = tmp_path / "reference.cu"
    secret.write_text(KERNEL)
    link = tmp_path / "vector_add.cu"
    link.symlink_to(secret)
    assert read_source(link) == ("", "vector_add.cu is a symbolic link; submit the file itself")
