"""Decode a parsed kernel once into a compact program: one :class:`Instr` per PTX
instruction with its opcode, modifiers, types, operands, predicate guard, branch target
and source line. Execution (``machine.py``) binds these to a chunk's registers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autograder.emulator.ptx import TYPE_BYTES, Kernel

TYPES = frozenset(TYPE_BYTES)


@dataclass(frozen=True)
class Reg:
    name: str
    negate: bool = False  # "!%p1" as a predicate source


@dataclass(frozen=True)
class Imm:
    text: str


@dataclass(frozen=True)
class Sreg:
    name: str  # "%tid.x", "%laneid", ...


@dataclass(frozen=True)
class Sym:
    name: str  # a variable, parameter, label or function


@dataclass(frozen=True)
class Addr:
    base: Reg | Sym | Imm
    offset: int


@dataclass(frozen=True)
class Vec:
    items: tuple  # Reg, Imm or None ("_") each


Operand = Reg | Imm | Sreg | Sym | Addr | Vec


@dataclass
class Instr:
    index: int
    op: str  # "add", "ld", "setp", ...
    mods: tuple[str, ...]  # every dotted suffix in order, e.g. ("global", "v4", "f32")
    types: tuple[str, ...]  # the suffixes that are PTX types, in order
    operands: tuple[Operand, ...]
    guard: Reg | None  # "@%p1" / "@!%p1"
    line: int | None
    text: str
    target: int = -1  # branch target (instruction index) of a bra; -1: none or unknown
    extra: dict = field(default_factory=dict)

    @property
    def type(self) -> str:
        return self.types[-1] if self.types else "b32"


SPECIAL_PREFIXES = (
    "%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid",
    "%gridid", "%lanemask", "%clock", "%globaltimer", "%dynamic_smem_size", "%total_smem_size",
)
_ADDR = re.compile(r"^\[\s*([^\]+]+?)\s*(?:\+\s*(-?\s*(?:0x)?[0-9a-fA-F]+))?\s*\]$")


def decode(kernel: Kernel) -> list[Instr]:
    return [_instr(k, s.text, s.line, kernel.labels) for k, s in enumerate(kernel.body)]


def _instr(index: int, text: str, line: int | None, labels: dict[str, int]) -> Instr:
    guard = None
    body = text.strip()
    if body.startswith("@"):
        pred, body = body[1:].split(None, 1)
        guard = Reg(pred.lstrip("!"), pred.startswith("!"))
    parts = body.split(None, 1)
    opcode = parts[0]
    op, *mods = opcode.split(".")
    operands = tuple(_operand(o) for o in _split_operands(parts[1])) if len(parts) > 1 else ()
    types = tuple(m for m in mods if m in TYPES)
    ins = Instr(index, op, tuple(mods), types, operands, guard, line, text.strip())
    if op == "bra" and operands and isinstance(operands[0], Sym):
        ins.target = labels.get(operands[0].name, -1)
    return ins


def _split_operands(text: str) -> list[str]:
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


def _operand(text: str) -> Operand:
    text = text.strip()
    if text.startswith("["):
        return _address(text)
    if text.startswith("{"):
        items = [t.strip() for t in text.strip("{}").split(",")]
        return Vec(tuple(None if t == "_" else _operand(t) for t in items))
    if "|" in text:  # "%r31|%p2": a value and a predicate destination
        return Vec(tuple(_operand(t) for t in text.split("|")))
    if text.startswith("!"):
        return Reg(text[1:], True)
    if text.startswith(SPECIAL_PREFIXES):
        return Sreg(text)
    if text.startswith("%"):
        return Reg(text)
    if text[0].isdigit() or text[0] == "-":
        return Imm(text)
    return Sym(text)


def _address(text: str) -> Addr:
    match = _ADDR.match(text.replace(" ", ""))
    if match is None:
        raise ValueError(f"cannot parse address {text}")
    base_text, offset = match.groups()
    offset = int(offset.replace(" ", ""), 0) if offset else 0
    base = _operand(base_text)
    return Addr(base, offset)


def immediate_bits(text: str, type_: str) -> int | float:
    """The value of an immediate written in PTX (``0f3F800000``, ``0d...``, ``-8``, ``0x10``)."""
    neg = text.startswith("-")
    body = text[1:] if neg else text
    if body[:2] in ("0f", "0F", "0d", "0D"):
        import struct

        raw = int(body[2:], 16)
        value = (struct.unpack("<f", raw.to_bytes(4, "little"))[0] if body[1] in "fF"
                 else struct.unpack("<d", raw.to_bytes(8, "little"))[0])
        return -value if neg else value
    if body.endswith(("U", "u")):
        body = body[:-1]
    value = float(body) if ("." in body or "e" in body) and not body.startswith("0x") else int(body, 0)
    return -value if neg else value
