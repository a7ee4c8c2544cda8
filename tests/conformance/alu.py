"""One kernel per instruction and modifier the emulator implements, written as inline PTX so
that the instruction the GPU runs is exactly the one named: each lane loads its operands, runs
the instruction once and stores what it wrote. Every instruction runs three ways: converged
(every lane of the chunk at once: the emulator's fast path), diverged (a random half of the
lanes, warps whole, empty and mixed: the lane-by-lane path), and with its destination in the
register of a source (``d = a``, and ``d = c`` for the three-source ones: the aliasing that
once made ``t += x * w`` compute ``2 * x * w``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

# C type and inline-asm constraint of each PTX type's register
REGISTERS = {
    "u16": ("unsigned short", "h"), "s16": ("short", "h"), "f16": ("unsigned short", "h"),
    "u32": ("unsigned", "r"), "s32": ("int", "r"), "b32": ("unsigned", "r"), "pred": ("unsigned", "r"),
    "f16x2": ("unsigned", "r"), "bf16x2": ("unsigned", "r"), "tf32": ("unsigned", "r"),
    "u64": ("unsigned long long", "l"), "s64": ("long long", "l"), "b64": ("unsigned long long", "l"),
    "f32": ("float", "f"), "f64": ("double", "d"),
}  # fmt: skip
OUTPUT_ROLES = ("d", "p")  # p: a predicate destination, stored as 0 or 1


@dataclass(frozen=True)
class Operand:
    role: str  # d, p: destinations; a, b, c, e, q (a predicate source): sources
    kind: str  # a key of DTYPES


@dataclass(frozen=True)
class Instruction:
    text: str  # "add.rz.f32"
    operands: tuple[Operand, ...]
    tolerance: str = ""  # an approximate instruction's allowance (``suite.within``)

    @property
    def sources(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role not in OUTPUT_ROLES)

    @property
    def destinations(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role in OUTPUT_ROLES)


def parse(line: str) -> Instruction:
    """``"add.rz.f32 d:f32 a:f32 b:f32"``: the opcode and its operands in PTX order; an
    approximate instruction ends with its allowance, ``~r22`` (relative error 2^-22) or
    ``~a21`` (2^-21 of the larger of 1 and the result), ``:pi`` when it holds for |a| <= pi
    (the ISA's bounds, which the H200 meets well inside: ``bench/results/conformance.md``)."""
    words = line.split()
    tolerance = words.pop()[1:] if words[-1].startswith("~") else ""
    operands = tuple(Operand(*w.split(":")) for w in words[1:])
    return Instruction(words[0], operands, tolerance)


def _table() -> list[str]:
    lines = []
    for t in ("s32", "u32", "s64", "u64"):
        w = "b" + t[1:]
        lines += [
            f"{op} d:{t} a:{t} b:{t}"
            for op in (
                f"add.{t}",
                f"sub.{t}",
                f"mul.lo.{t}",
                f"mul.hi.{t}",
                f"div.{t}",
                f"rem.{t}",
                f"min.{t}",
                f"max.{t}",
            )
        ]
        lines += [f"mad.lo.{t} d:{t} a:{t} b:{t} c:{t}", f"mad.hi.{t} d:{t} a:{t} b:{t} c:{t}"]
        lines += [
            f"shr.{t} d:{t} a:{t} b:u32",
            f"bfind.{t} d:u32 a:{t}",
            f"bfind.shiftamt.{t} d:u32 a:{t}",
            f"bfe.{t} d:{t} a:{t} b:u32 c:u32",
        ]
        lines += [f"setp.{c}.{t} p:pred a:{t} b:{t}" for c in ("eq", "ne", "lt", "le", "gt", "ge")]
        if t[0] == "s":
            lines += [f"abs.{t} d:{t} a:{t}", f"neg.{t} d:{t} a:{t}"]
        else:
            lines += [f"setp.{c}.{t} p:pred a:{t} b:{t}" for c in ("lo", "ls", "hi", "hs")]
        lines += [f"{op}.{w} d:{w} a:{w} b:{w}" for op in ("and", "or", "xor")]
        lines += [
            f"not.{w} d:{w} a:{w}",
            f"cnot.{w} d:{w} a:{w}",
            f"shl.{w} d:{w} a:{w} b:u32",
            f"popc.{w} d:u32 a:{w}",
            f"clz.{w} d:u32 a:{w}",
            f"brev.{w} d:{w} a:{w}",
            f"bfi.{w} d:{w} a:{w} b:{w} c:u32 e:u32",
            f"selp.{w} d:{w} a:{w} b:{w} q:pred",
        ]
    for t in ("s32", "u32", "s16", "u16"):
        wide = t[0] + str(2 * int(t[1:]))
        lines += [f"mul.wide.{t} d:{wide} a:{t} b:{t}", f"mad.wide.{t} d:{wide} a:{t} b:{t} c:{wide}"]
    lines += [
        "add.sat.s32 d:s32 a:s32 b:s32",
        "sub.sat.s32 d:s32 a:s32 b:s32",
        "sad.s32 d:s32 a:s32 b:s32 c:s32",
        "sad.u32 d:u32 a:u32 b:u32 c:u32",
        "setp.lt.and.s32 p:pred a:s32 b:s32 q:pred",
        "setp.ge.or.u32 p:pred a:u32 b:u32 q:pred",
        "setp.ne.xor.s64 p:pred a:s64 b:s64 q:pred",
    ]
    lines += [
        f"prmt.b32{m} d:b32 a:b32 b:b32 c:u32" for m in ("", ".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16")
    ]
    lines += [f"shf.{s}.{m}.b32 d:b32 a:b32 b:b32 c:u32" for s in "lr" for m in ("wrap", "clamp")]
    for f in ("f32", "f64"):
        rounding = ("rn", "rz", "rm", "rp")
        lines += [f"{op}.{r}.{f} d:{f} a:{f} b:{f}" for op in ("add", "sub", "mul") for r in rounding]
        lines += [f"{op}.{f} d:{f} a:{f} b:{f}" for op in ("add", "sub", "mul", "min", "max")]
        lines += [f"fma.{r}.{f} d:{f} a:{f} b:{f} c:{f}" for r in rounding]
        lines += [f"div.{r}.{f} d:{f} a:{f} b:{f}" for r in rounding]
        lines += [f"rcp.{r}.{f} d:{f} a:{f}" for r in rounding]
        lines += [f"sqrt.{r}.{f} d:{f} a:{f}" for r in rounding]
        lines += [f"{op}.{f} d:{f} a:{f}" for op in ("abs", "neg")]
        lines += [f"copysign.{f} d:{f} a:{f} b:{f}"]
        lines += [
            f"setp.{c}.{f} p:pred a:{f} b:{f}"
            for c in (
                "eq",
                "ne",
                "lt",
                "le",
                "gt",
                "ge",
                "equ",
                "neu",
                "ltu",
                "leu",
                "gtu",
                "geu",
                "num",
                "nan",
            )
        ]
        lines += [
            f"testp.{c}.{f} p:pred a:{f}"
            for c in ("finite", "infinite", "number", "notanumber", "normal", "subnormal")
        ]
    lines += [f"{op}.ftz.f32 d:f32 a:f32 b:f32" for op in ("add", "sub", "mul", "min", "max")]
    lines += [
        "fma.rn.ftz.f32 d:f32 a:f32 b:f32 c:f32",
        "fma.rn.sat.f32 d:f32 a:f32 b:f32 c:f32",
        "add.sat.f32 d:f32 a:f32 b:f32",
        "mul.rn.sat.f32 d:f32 a:f32 b:f32",
        "min.NaN.f32 d:f32 a:f32 b:f32",
        "max.NaN.f32 d:f32 a:f32 b:f32",
        "div.full.f32 d:f32 a:f32 b:f32 ~r21",
        "div.approx.f32 d:f32 a:f32 b:f32 ~r21",
        "rcp.approx.f32 d:f32 a:f32 ~r22",
        "rcp.approx.ftz.f64 d:f64 a:f64 ~r19",
        "sqrt.approx.f32 d:f32 a:f32 ~r22",
        "rsqrt.approx.f32 d:f32 a:f32 ~r22",
        "rsqrt.approx.f64 d:f64 a:f64 ~r22",
        "ex2.approx.f32 d:f32 a:f32 ~r22",
        "ex2.approx.ftz.f32 d:f32 a:f32 ~r22",
        "lg2.approx.f32 d:f32 a:f32 ~a21",
        "sin.approx.f32 d:f32 a:f32 ~a20:pi",
        "cos.approx.f32 d:f32 a:f32 ~a20:pi",
        "tanh.approx.f32 d:f32 a:f32 ~r11",
        "abs.ftz.f32 d:f32 a:f32",
        "neg.ftz.f32 d:f32 a:f32",
        "sqrt.rn.ftz.f32 d:f32 a:f32",
        "div.rn.ftz.f32 d:f32 a:f32 b:f32",
    ]
    conversions = [
        ("f32", "f64", ("rn", "rz", "rm", "rp")),
        ("f64", "f32", ("",)),
        ("f16", "f32", ("rn", "rz", "rm", "rp")),
        ("f32", "f16", ("",)),
        ("f64", "f16", ("",)),
    ]
    for d in ("s32", "u32", "s64", "u64", "s16", "u16"):
        conversions += [(d, f, ("rni", "rzi", "rmi", "rpi")) for f in ("f32", "f64")]
        conversions += [(f, d, ("rn", "rz", "rm", "rp")) for f in ("f32", "f64")]
    for d, s in itertools.permutations(("s16", "u16", "s32", "u32", "s64", "u64"), 2):
        conversions += [
            (d, s, ("", "sat") if _narrows(d, s) else ("",))
        ]  # ptxas refuses a .sat that cannot clamp
    conversions += [(f, f, ("rni", "rzi", "rmi", "rpi", "sat", "ftz")) for f in ("f32",)]
    conversions += [("f64", "f64", ("rni", "rzi", "rmi", "rpi"))]
    for d, s, modes in conversions:
        lines += [f"cvt{'.' + m if m else ''}.{d}.{s} d:{d} a:{s}" for m in modes]
    lines += [
        "cvt.rn.f16x2.f32 d:f16x2 a:f32 b:f32",
        "cvt.rn.bf16x2.f32 d:bf16x2 a:f32 b:f32",
        "cvt.rz.bf16x2.f32 d:bf16x2 a:f32 b:f32",
        "cvt.rn.relu.bf16x2.f32 d:bf16x2 a:f32 b:f32",
        "cvt.rna.tf32.f32 d:tf32 a:f32",
    ]
    lines += [f"{op}.f16 d:f16 a:f16 b:f16" for op in ("add", "sub", "mul", "min", "max")]
    lines += [f"{op}.f16x2 d:f16x2 a:f16x2 b:f16x2" for op in ("add", "sub", "mul", "min", "max")]
    lines += [
        "fma.rn.f16 d:f16 a:f16 b:f16 c:f16",
        "fma.rn.f16x2 d:f16x2 a:f16x2 b:f16x2 c:f16x2",
        "neg.f16x2 d:f16x2 a:f16x2",
        "abs.f16x2 d:f16x2 a:f16x2",
    ]
    lines += [
        f"{op}.bf16x2 d:bf16x2 a:bf16x2 b:bf16x2" for op in ("add.rn", "sub.rn", "mul.rn", "min", "max")
    ]
    lines += ["fma.rn.bf16x2 d:bf16x2 a:bf16x2 b:bf16x2 c:bf16x2"]
    lines += [
        "set.lt.u32.s32 d:u32 a:s32 b:s32",
        "set.gtu.f32.f32 d:f32 a:f32 b:f32",
        "set.ne.s32.f64 d:s32 a:f64 b:f64",
        "set.ge.and.u32.u32 d:u32 a:u32 b:u32 q:pred",
    ]
    return lines


def _narrows(d: str, s: str) -> bool:
    """Can a value of integer type ``s`` fall outside the range of ``d``?"""

    def bounds(t: str) -> tuple[int, int]:
        bits = int(t[1:])
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t[0] == "s" else (0, (1 << bits) - 1)

    (dl, dh), (sl, sh) = bounds(d), bounds(s)
    return sl < dl or sh > dh


INSTRUCTIONS = tuple(parse(line) for line in _table())
