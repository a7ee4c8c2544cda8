"""Decode a parsed kernel once into a compact program: one :class:`Instr` per PTX
instruction with its opcode, modifiers, types, operands, predicate guard, branch target
and source line. Execution (``machine.py``) binds these to a chunk's registers.

``decode_ptx`` is the whole front end, in order: parse (``ptx.py``), inline the device
functions (``inline.py``), decode (here)."""

from __future__ import annotations

import functools
import re
from functools import partial

from autograder.emulator.inline import inline_calls
from autograder.emulator.isa import SPECIAL_REGISTERS, TYPES, Addr, Imm, Instr, Operand, Reg, Sreg, Sym, Vec
from autograder.emulator.ptx import Kernel, parse_kernel

_NESTS = re.compile(r"[\[{()\]}]")  # what _split_operands must count
_ADDR = re.compile(r"^\[\s*([^\]+]+?)\s*(?:\+\s*(-?\s*(?:0x)?[0-9a-fA-F]+))?\s*\]$")


def decode_ptx(ptx: str, lowered_name: str, filename: str) -> tuple[Kernel, list[Instr]]:
    """The kernel ``lowered_name`` of ``ptx``, with the module's device functions it calls
    inlined, and its decoded program."""
    kernel, functions = parse_kernel(ptx, lowered_name, filename)
    inline_calls(kernel, functions, filename)
    return kernel, decode(kernel)


def decode(kernel: Kernel) -> list[Instr]:
    """One :class:`Instr` per statement of ``kernel.body``, as :func:`decode_reference` makes
    them; an opcode's parts, a guard and an operand recur: each distinct text is decoded once."""
    registers, labels = kernel.registers, kernel.labels
    operands: dict[str, Operand] = {}
    opcodes: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
    guards: dict[str, Reg] = {}
    program = []
    for index, statement in enumerate(kernel.body):
        text = statement.text.strip()
        guard, body = None, text
        if body.startswith("@"):
            pred, body = body[1:].split(None, 1)
            guard = guards.get(pred)
            if guard is None:
                guard = guards[pred] = Reg(pred.lstrip("!"), pred.startswith("!"))
        parts = body.split(None, 1)
        opcode = parts[0]
        decoded = opcodes.get(opcode)
        if decoded is None:
            head, *suffixes = opcode.split(".")
            decoded = opcodes[opcode] = (head, tuple(suffixes), tuple(m for m in suffixes if m in TYPES))
        op, mods, types = decoded
        ops: tuple[Operand, ...] = ()
        if len(parts) > 1:
            rest = parts[1]
            if _NESTS.search(rest):
                texts = _split_operands(rest)
            else:  # most instructions: a plain list, its texts stripped where they are first met
                texts = rest.split(",")
                if not texts[-1].strip():
                    texts.pop()
            items = []
            for o in texts:
                item = operands.get(o)
                if item is None:
                    stripped = o.strip()
                    item = operands.get(stripped)
                    if item is None:
                        plain = stripped[:1] == "%" and "|" not in stripped  # a register (as _operand finds)
                        if plain and stripped not in SPECIAL_REGISTERS:
                            item = Reg(stripped)
                        else:
                            item = _operand(stripped, registers)
                    operands[o] = operands[stripped] = item
                items.append(item)
            ops = tuple(items)
        target = -1
        if op == "bra" and ops and isinstance(ops[0], Sym):
            target = labels.get(ops[0].name, -1)
        program.append(
            Instr(index, op, mods, types, ops, guard, statement.line, text, target, statement.calls)
        )
    return program


def decode_reference(kernel: Kernel) -> list[Instr]:
    """:func:`decode` one instruction at a time by :func:`_instr`, the plain way it takes a
    shortcut past (``tests/emulator/test_decode_fast.py`` compares them)."""
    operand = functools.cache(partial(_operand, registers=kernel.registers))
    program = [_instr(k, s.text, s.line, kernel.labels, operand) for k, s in enumerate(kernel.body)]
    for ins, statement in zip(program, kernel.body, strict=True):
        ins.calls = statement.calls
    return program


def _instr(index: int, text: str, line: int | None, labels: dict[str, int], operand) -> Instr:
    """Instruction ``index``, its ``text`` decoded (``operand``: an operand's text -> the operand)."""
    guard = None
    body = text.strip()
    if body.startswith("@"):
        pred, body = body[1:].split(None, 1)
        guard = Reg(pred.lstrip("!"), pred.startswith("!"))
    parts = body.split(None, 1)
    opcode = parts[0]
    op, *mods = opcode.split(".")
    operands = tuple(operand(o) for o in _split_operands(parts[1])) if len(parts) > 1 else ()
    types = tuple(m for m in mods if m in TYPES)
    ins = Instr(index, op, tuple(mods), types, operands, guard, line, text.strip())
    if op == "bra" and operands and isinstance(operands[0], Sym):
        ins.target = labels.get(operands[0].name, -1)
    return ins


def _split_operands(text: str) -> list[str]:
    if not _NESTS.search(text):  # most instructions: a plain list (a third of decoding, char by char)
        out = [o.strip() for o in text.split(",")]
        return out if out[-1] else out[:-1]
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [o.strip("()").strip() if o.startswith("(") else o for o in out]


def _operand(text: str, registers) -> Operand:
    text = text.strip()
    if text.startswith("["):
        return _address(text, registers)
    if text.startswith("{"):
        items = [t.strip() for t in text.strip("{}").split(",")]
        return Vec(tuple(None if t == "_" else _operand(t, registers) for t in items))
    if "|" in text:  # "%r31|%p2": a value and a predicate destination
        return Vec(tuple(_operand(t, registers) for t in text.split("|")))
    if text.startswith("!"):
        return Reg(text[1:], True)
    if text in SPECIAL_REGISTERS:
        return Sreg(text)
    if text.startswith("%") or text in registers:  # inline asm declares some without a %
        return Reg(text)
    if text[0].isdigit() or text[0] == "-":
        return Imm(text)
    return Sym(text)


def _address(text: str, registers) -> Addr:
    match = _ADDR.match(text.replace(" ", ""))
    if match is None:
        raise ValueError(f"cannot parse address {text}")
    base_text, offset = match.groups()
    offset = int(offset.replace(" ", ""), 0) if offset else 0
    base = _operand(base_text, registers)
    return Addr(base, offset)
