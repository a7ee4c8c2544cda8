"""Decoding reads each distinct operand text once per kernel (``program.decode``): the
program of every reference kernel is the one decoded operand by operand."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from autograder.backends.compiler import compile_ptx
from autograder.contract import Program
from autograder.emulator import program
from autograder.emulator.ptx import parse_kernel

REFERENCES = sorted((Path(__file__).resolve().parents[2] / "reference").glob("*.cu"))


@pytest.mark.parametrize("source", REFERENCES, ids=lambda path: path.stem)
def test_a_kernel_decodes_as_operand_by_operand(source, monkeypatch):
    compiled = compile_ptx(Program(source.read_text(), source.name, source.stem, ()))
    kernel, _functions = parse_kernel(compiled.ptx, compiled.lowered_name, source.name)
    memoised = program.decode(kernel)
    monkeypatch.setattr(functools, "cache", lambda fn: fn)  # every operand decoded where it stands
    assert program.decode(kernel) == memoised
