"""The compile cache (``backends/compile_cache.py``): NVRTC's answer is kept on disk and served
to a later compile of the same source by any process; anything that changes the answer is in
the key; a crash is never kept; a cache that cannot be used is no cache."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import replace

import pytest

from autograder.backends import compile_cache, compiler
from autograder.contract import CompileError, Program

SOURCE = """extern "C" __global__ void add(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + SCALE;
}"""
PROGRAM = Program(SOURCE, "add.cu", "add", (("SCALE", "1.0f"),))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder, and no compile of this process remembered."""
    monkeypatch.setenv(compile_cache.VARIABLE, str(tmp_path / "compiles"))
    compiler._compile.cache_clear()
    yield tmp_path / "compiles"
    compiler._compile.cache_clear()


def _no_compiler(monkeypatch) -> None:
    """From here on, a compile that reaches NVRTC fails the test."""

    def refused(*_args):
        raise AssertionError("NVRTC was asked: the cache did not answer")

    monkeypatch.setattr(compiler, "_in_child", refused)
    compiler._compile.cache_clear()


def test_a_compile_is_kept_and_served_without_nvrtc(cache, monkeypatch):
    first = compiler.compile_ptx(PROGRAM)
    _no_compiler(monkeypatch)
    assert compiler.compile_ptx(PROGRAM) == first
    assert first.cubin.startswith(b"\x7fELF") and "add" in first.lowered_name


def test_another_process_is_served_what_this_one_compiled(cache):
    first = compiler.compile_ptx(PROGRAM)
    script = (
        "import sys; from autograder.backends import compiler; from autograder.contract import Program\n"
        "compiler._in_child = None  # any compile here would fail\n"
        f"print(compiler.compile_ptx(Program({SOURCE!r}, 'add.cu', 'add', (('SCALE', '1.0f'),))).ptx)"
    )
    served = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert served.stdout.rstrip("\n") == first.ptx.rstrip("\n")


def test_a_refusal_is_kept_with_its_class_and_words(cache, monkeypatch):
    broken = Program(SOURCE.replace("a[i] +", "a[i] +* +"), "add.cu", "add", (("SCALE", "1.0f"),))
    with pytest.raises(CompileError) as first:
        compiler.compile_ptx(broken)
    _no_compiler(monkeypatch)
    with pytest.raises(CompileError) as again:
        compiler.compile_ptx(broken)
    assert type(again.value) is type(first.value) and again.value.log == first.value.log
    assert "add.cu" in again.value.log


def test_a_ptxas_refusal_comes_back_as_one():
    record = {"kind": "refused", "class": "PtxasRefusal", "log": "add.cu(3): error: no"}
    kept = compiler._kept(record)
    assert isinstance(kept, compiler.PtxasRefusal) and kept.log == record["log"]


@pytest.mark.parametrize(
    "changed",
    [
        lambda p, a, c: (replace(p, source=p.source + "\n"), a, c),
        lambda p, a, c: (replace(p, filename="other.cu"), a, c),
        lambda p, a, c: (replace(p, kernel="other"), a, c),
        lambda p, a, c: (replace(p, defines=(("SCALE", "2.0f"),)), a, c),
        lambda p, a, c: (p, "sm_80", c),
        lambda p, a, c: (p, a, (*c[:-1], "another compiler.py")),
        lambda p, a, c: (p, a, (("nvidia-cuda-nvrtc==13.6.0",), *c[1:])),
        lambda p, a, c: (p, a, (c[0], ("/another/include",), c[2])),
    ],
    ids=["source", "filename", "kernel", "defines", "arch", "compiler.py", "packages", "include dirs"],
)
def test_everything_the_answer_depends_on_is_in_the_key(changed):
    identity = compiler.compiler_identity()
    assert compile_cache.key(*changed(PROGRAM, "sm_90", identity)) != compile_cache.key(
        PROGRAM, "sm_90", identity
    )


def test_a_crash_of_the_compiler_is_not_kept(cache, monkeypatch):
    monkeypatch.setattr(compiler, "_in_child", lambda *_args: signal.SIGSEGV)
    with pytest.raises(CompileError, match="crashed"):
        compiler.compile_ptx(PROGRAM)
    digest = compile_cache.key(PROGRAM, compiler.EMULATOR_ARCH, compiler.compiler_identity())
    assert compile_cache.load(digest) is None


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.VARIABLE, "off")
    compiler._compile.cache_clear()
    assert compile_cache.folder() is None
    compiler.compile_ptx(PROGRAM)
    _no_compiler(monkeypatch)
    with pytest.raises(AssertionError, match="NVRTC was asked"):
        compiler.compile_ptx(PROGRAM)


def test_a_cache_that_cannot_be_opened_is_no_cache(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(compile_cache.VARIABLE, str(blocked / "compiles"))
    compiler._compile.cache_clear()
    assert compiler.compile_ptx(PROGRAM).cubin.startswith(b"\x7fELF")
    compiler._compile.cache_clear()


def test_a_record_this_version_cannot_read_is_a_miss(cache, monkeypatch):
    digest = compile_cache.key(PROGRAM, compiler.EMULATOR_ARCH, compiler.compiler_identity())
    compile_cache.store(digest, {"kind": "compiled", "ptx": "stale"})  # no cubin, no name
    assert compiler.compile_ptx(PROGRAM).ptx != "stale"


def test_an_nvrtc_other_than_the_packages_keeps_nothing(cache, monkeypatch):
    """The keys name the pinned package's NVRTC: a toolkit's, loaded instead, must not answer
    under its name."""
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (13, 0))
    compiler.compile_ptx(PROGRAM)
    digest = compile_cache.key(PROGRAM, compiler.EMULATOR_ARCH, compiler.compiler_identity())
    assert compile_cache.load(digest) is None


def test_an_answer_from_the_cache_loads_no_nvrtc(cache):
    """A worker whose compiles the cache answers never maps NVRTC (40 MB)."""
    compiler.compile_ptx(PROGRAM)
    script = (
        "import sys; from autograder.backends import compiler; from autograder.contract import Program\n"
        f"compiler.compile_ptx(Program({SOURCE!r}, 'add.cu', 'add', (('SCALE', '1.0f'),)))\n"
        "maps = open('/proc/self/maps').read()\n"
        "print('libnvrtc' in maps)"
    )
    served = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert served.stdout.strip() == "False"


def test_without_a_home_folder_there_is_no_cache(monkeypatch):
    monkeypatch.delenv(compile_cache.VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def homeless():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(compile_cache.Path, "home", staticmethod(homeless))
    assert compile_cache.folder() is None
