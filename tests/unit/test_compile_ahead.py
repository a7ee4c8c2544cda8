"""Compiles started ahead (``backends/compile_ahead.py``): a compile asked for takes the answer
of one started ahead, whole and unchanged, refusals included; one whose turn has not come is
compiled at once, never waited for behind another; what is never asked for is stopped; and a
grading names ahead exactly the programs it then compiles (``pipeline.programs_ahead``)."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.backends import compile_ahead, compile_cache, compile_child, compiler
from autograder.backends.compiler import EMULATOR_ARCH
from autograder.backends.emulator import EmulatorBackend
from autograder.backends.registry import Backends
from autograder.contract import CompileError, Program
from autograder.course.folder import read_course
from autograder.grading import pipeline

ROOT = Path(__file__).resolve().parents[2]
SOURCE = """extern "C" __global__ void add(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + SCALE;
}"""
PROGRAM = Program(SOURCE, "add.cu", "add", (("SCALE", "1.0f"),))
OTHER = replace(PROGRAM, defines=(("SCALE", "2.0f"),))


@pytest.fixture
def ahead(monkeypatch):
    """No compile cache, no compile of this process remembered, one compile ahead at a time, and
    every compile's child counted as it is forked."""
    monkeypatch.setenv(compile_cache.VARIABLE, "off")
    monkeypatch.setattr(compile_ahead, "slots", lambda: 1)
    started = []
    born = compile_child.Child.__init__

    def counted(self, compile_, program, arch, held=False):
        started.append(program)
        born(self, compile_, program, arch, held)

    monkeypatch.setattr(compile_child.Child, "__init__", counted)
    compiler._compile.cache_clear()
    yield started
    compile_ahead.stop()
    compiler._compile.cache_clear()


def _slow(program: Program, arch: str):
    time.sleep(60)  # in the child: a compile that holds the one slot


def test_a_compile_asked_for_takes_the_answer_started_ahead(ahead):
    alone = compiler._in_child(compiler._compile_here, PROGRAM, EMULATOR_ARCH)
    ahead.clear()
    compiler.compile_ptx_ahead([PROGRAM, PROGRAM])
    assert ahead == [PROGRAM]  # started at once, once
    taken = compiler.compile_ptx(PROGRAM)
    assert (taken.ptx, taken.cubin, taken.lowered_name) == (alone.ptx, alone.cubin, alone.lowered_name)
    assert "registers" in taken.log  # ptxas's report (its compile time differs)
    assert ahead == [PROGRAM]  # no second compile


def test_a_refusal_compiled_ahead_is_the_same_refusal(ahead):
    broken = replace(PROGRAM, source=SOURCE.replace("c[i] =", "c[i] = = "))
    with pytest.raises(CompileError) as alone:
        compiler._in_child(compiler._compile_here, broken, EMULATOR_ARCH)
    compiler.compile_ptx_ahead([broken])
    with pytest.raises(CompileError) as taken:
        compiler.compile_ptx(broken)
    assert taken.value.log == alone.value.log and len(ahead) == 2


def test_a_compile_whose_turn_has_not_come_is_compiled_at_once(ahead):
    compile_ahead.schedule([(PROGRAM, EMULATOR_ARCH)], _slow)  # holds the slot for a minute
    compiler.compile_ptx_ahead([OTHER])  # queued behind it
    started = time.monotonic()
    compiled = compiler.compile_ptx(OTHER)
    assert time.monotonic() - started < 30, "the compile waited for the one ahead of it"
    assert "2.0" in compiled.ptx or "0f40000000" in compiled.ptx
    assert ahead == [PROGRAM, OTHER]


def test_what_is_never_asked_for_is_stopped(ahead):
    compile_ahead.schedule([(PROGRAM, EMULATOR_ARCH), (OTHER, EMULATOR_ARCH)], _slow)
    children = [*compile_ahead._running.values(), *compile_ahead._held.values()]
    assert len(compile_ahead._running) == 1 and len(compile_ahead._held) == 1
    compile_ahead.stop()
    assert not compile_ahead._running and not compile_ahead._held
    for child in children:  # killed and reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(child.pid, os.WNOHANG)


def test_a_grading_s_compiles_ahead_replace_those_the_last_one_left(ahead):
    compile_ahead.schedule([(PROGRAM, EMULATOR_ARCH), (OTHER, EMULATOR_ARCH)], _slow)
    left = [*compile_ahead._running.values(), *compile_ahead._held.values()]
    compiler.compile_ptx_ahead([OTHER])  # the next grading's
    assert list(compile_ahead._running) == [(OTHER, EMULATOR_ARCH)] and not compile_ahead._held
    for child in left:  # a worker grading one submission after another keeps no process of the last
        with pytest.raises(ChildProcessError):
            os.waitpid(child.pid, os.WNOHANG)
    assert "0f40000000" in compiler.compile_ptx(OTHER).ptx  # 2.0f


def test_a_grading_names_ahead_exactly_the_programs_it_compiles(ahead, monkeypatch, tmp_path):
    course = read_course(ROOT)
    monkeypatch.setattr(compile_ahead, "slots", lambda: 0)  # nothing ahead: every compile asked
    asked = []
    taken = compile_ahead.take

    def recorded(key):
        asked.append(key)
        return taken(key)

    monkeypatch.setattr(compile_ahead, "take", recorded)
    names = ["vector_add", "reduction"]  # reduction: a define set its first group does not have
    submission = tmp_path / "submission"
    submission.mkdir()
    for name in names:  # the student's kernels are not the reference's
        text = (ROOT / "reference" / f"{name}.cu").read_text()
        (submission / f"{name}.cu").write_text(text + "// a student's copy\n")
    backend = EmulatorBackend()
    backends = Backends(grading=backend, safety=backend)
    graded = pipeline.grade_submission(submission, course, backends, seed=3, assignments=names)
    assert graded.items and all(
        i.score == i.item.points for i in graded.items if i.item.check != "performance"
    )
    named = set(pipeline.programs_ahead(course, list(graded.submitted), 3))
    assert {program for program, arch in asked if arch == EMULATOR_ARCH} == named


def test_a_head_start_that_fails_costs_the_grading_nothing(monkeypatch):
    def no_fork(self, programs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(EmulatorBackend, "compile_ahead", no_fork)
    backend = EmulatorBackend()
    course = read_course(ROOT)
    graded = pipeline.grade_submission(
        ROOT / "reference",
        course,
        Backends(grading=backend, safety=backend),
        seed=3,
        assignments=["vector_add"],
    )
    untimed = [i for i in graded.items if i.item.check != "performance"]
    assert untimed and all(i.score == i.item.points for i in untimed)
