"""The decoder's shortcuts against the plain ways they take a shortcut past: ``program.decode``
(each distinct opcode, guard and operand text decoded once, a register's text without
``_operand``) against ``program.decode_reference`` (``_instr`` per instruction), and
``ptx._tokenize`` taking a line that is one statement whole against its general loop, on the
PTX of every reference kernel and corpus kernel as NVRTC writes it and reshaped: statements
joined on a line, split across lines, labels and braces sharing a line, comments."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from autograder.backends.compiler import compile_ptx
from autograder.contract import Program
from autograder.emulator import program, ptx

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = sorted((ROOT / "reference").glob("*.cu"))
CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.cu"))


def compiled(source: Path):
    text = source.read_text()
    kernel = source.stem
    if source.parent.name == "corpus":
        kernel = re.search(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)", text)[1]
    return compile_ptx(Program(text, source.name, kernel, ())), source.name


def reshaped(text: str, rng) -> str:
    """``text`` with statements joined on one line, split across two, a label on the
    line of what follows it and comments between, at random: the same PTX to the parser."""
    out: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        roll = rng.random()
        if out and roll < 0.15 and s.endswith(";") and out[-1].strip().endswith((";", ":")):
            out[-1] += " " + s  # joined to the line before
        elif roll < 0.3 and s.endswith(";") and " " in s and not s.startswith("."):
            head, tail = s.split(" ", 1)
            out += [head, "\t" + tail]  # split after its opcode
        elif roll < 0.35 and s.endswith(";") and not s.startswith("."):
            out.append(f"/* a comment */ {s} // and one after")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def decoded_both_ways(ptx_text: str, lowered: str, filename: str, monkeypatch):
    fast = program.decode_ptx(ptx_text, lowered, filename)
    with monkeypatch.context() as m:
        m.setattr(ptx, "_tokenize", partial(ptx._tokenize, whole_lines=False))
        m.setattr(program, "decode", program.decode_reference)
        slow = program.decode_ptx(ptx_text, lowered, filename)
    return fast, slow


@pytest.mark.parametrize("source", REFERENCES + CORPUS, ids=lambda path: path.stem)
def test_a_kernel_decodes_as_the_plain_way_decodes_it(source, monkeypatch):
    c, filename = compiled(source)
    assert ptx._tokenize(c.ptx) == ptx._tokenize(c.ptx, whole_lines=False)
    kernel, _functions = ptx.parse_kernel(c.ptx, c.lowered_name, filename)
    assert program.decode(kernel) == program.decode_reference(kernel)
    (fast_kernel, fast), (slow_kernel, slow) = decoded_both_ways(c.ptx, c.lowered_name, filename, monkeypatch)
    assert fast_kernel == slow_kernel
    assert fast == slow
    assert [repr(i) for i in fast] == [repr(i) for i in slow]  # the operands' types too


@pytest.mark.parametrize("source", REFERENCES + CORPUS, ids=lambda path: path.stem)
def test_reshaped_ptx_decodes_as_the_plain_way_decodes_it(source, monkeypatch):
    c, filename = compiled(source)
    rng = np.random.default_rng(abs(hash(source.stem)) % 2**32)
    for _ in range(3):
        text = reshaped(c.ptx, rng)
        assert ptx._tokenize(text) == ptx._tokenize(text, whole_lines=False)
        (fast_kernel, fast), (slow_kernel, slow) = decoded_both_ways(
            text, c.lowered_name, filename, monkeypatch
        )
        assert fast_kernel == slow_kernel
        assert fast == slow


def test_operand_texts_of_every_kind_decode_as_the_plain_way_decodes_them():
    """Instructions whose operands are of each kind, with odd spacing, a trailing comma and a
    guard, decoded in one kernel (so the memo sees each text again) both ways."""
    body = [
        "add.s32 %r1, %r2, 4",
        "add.s32  %r1 ,%r2,  -4 ",
        "@%p1 bra $L__BB0_1",
        "@!%p1 bra $L__BB0_1",
        "@!%p1 bra.uni $L__BB0_9",
        "mov.u32 %r3, %tid.x",
        "mov.u32 %r3, %laneid",
        "mov.u32 %r3,%tid.x",
        "ld.shared.v4.f32 {%f1, %f2, _, %f4}, [%rd1+16]",
        "ld.global.f32 %f1, [ %rd1 + -8 ]",
        "ld.global.f32 %f1, [shared_var+0x10]",
        "st.global.f32 [%rd1], %f1,",
        "add.s32 %r1, %r2, 4,",
        "add.s32 %r1, %r2, 4, ",
        "shfl.sync.bfly.b32 %r31|%p2, %r30, 16, 31, -1",
        "setp.lt.s32 %p1, %r1, 0f3F800000",
        "selp.b32 %r1, %r2, %r3, !%p1",
        "mov.b32 x, y",
        "call.uni (retval0), f, (param0, param1)",
        "exit",
        "ret",
    ]
    for _ in range(2):
        kernel = ptx.Kernel("k", [], registers={"x": "b32"})
        kernel.body = [ptx.Statement(text, k + 1) for k, text in enumerate(body * 2)]
        kernel.labels = {"$L__BB0_1": 3}
        fast, slow = program.decode(kernel), program.decode_reference(kernel)
        assert fast == slow
        assert [repr(i) for i in fast] == [repr(i) for i in slow]
        body = [f"  {text}  " for text in body]
