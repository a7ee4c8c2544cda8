"""The vocabulary every stage of the emulator shares; it imports nothing else of the emulator.

PTX's types (their sizes, their numpy dtypes), the decoded form of an instruction and its
operands (``program.py`` builds them, everything after it reads them), the value of a PTX
immediate, the scheduler's kinds of instruction (``ops.py`` classifies, ``machine.py``
dispatches on them) and the states of a lane (``machine.py`` sets them, ``barriers.py``
resolves waiting lanes)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from autograder.contract import Unsupported

# ----- PTX types ------------------------------------------------------------------
TYPE_BYTES = {
    "pred": 1,
    "b8": 1,
    "u8": 1,
    "s8": 1,
    "b16": 2,
    "u16": 2,
    "s16": 2,
    "f16": 2,
    "bf16": 2,
    "b32": 4,
    "u32": 4,
    "s32": 4,
    "f32": 4,
    "f16x2": 4,
    "bf16x2": 4,
    "tf32": 4,
    "b64": 8,
    "u64": 8,
    "s64": 8,
    "f64": 8,
    "b128": 16,
}
TYPES = frozenset(TYPE_BYTES)
DTYPES = {
    "s8": np.int8,
    "u8": np.uint8,
    "b8": np.uint8,
    "s16": np.int16,
    "u16": np.uint16,
    "b16": np.uint16,
    "f16": np.float16,
    "bf16": np.uint16,
    "s32": np.int32,
    "u32": np.uint32,
    "b32": np.uint32,
    "f32": np.float32,
    "f16x2": np.uint32,
    "bf16x2": np.uint32,
    "tf32": np.uint32,
    "s64": np.int64,
    "u64": np.uint64,
    "b64": np.uint64,
    "f64": np.float64,
    "pred": np.bool_,
}
_DTYPE_OF = {name: np.dtype(t) for name, t in DTYPES.items()}


def dtype_of(type_: str) -> np.dtype:
    return _DTYPE_OF[type_]


# ----- decoded instructions ---------------------------------------------------------
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


class NotEmulated(Unsupported):
    """A feature of the kernel the emulator does not emulate; its message is whole (it names
    the feature), so ``ops.build_executor`` only adds where it is."""


# PTX's special registers, by their full names (a component's: ``%tid.x``); what each reads
# in the emulator is ``special.py``'s table
_VECTORS = (
    "%tid",
    "%ntid",
    "%ctaid",
    "%nctaid",
    "%clusterid",
    "%nclusterid",
    "%cluster_ctaid",
    "%cluster_nctaid",
)
SPECIAL_REGISTERS = frozenset(
    [f"{name}.{axis}" for name in _VECTORS for axis in "xyz"]
    + ["%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid", "%is_explicit_cluster"]
    + ["%cluster_ctarank", "%cluster_nctarank", "%current_graph_exec"]
    + [f"%lanemask_{kind}" for kind in ("eq", "le", "lt", "ge", "gt")]
    + ["%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"]
    + ["%total_smem_size", "%aggr_smem_size", "%dynamic_smem_size"]
    + [f"%reserved_smem_offset_{what}" for what in ("begin", "end", "cap", "0", "1")]
    + [f"%pm{k}" for k in range(8)]
    + [f"%pm{k}_64" for k in range(8)]
    + [f"%envreg{k}" for k in range(32)]
)
# the special registers that change while a thread runs: read when an instruction runs
CLOCK_REGISTERS = frozenset(
    ["%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"]
)


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
    calls: tuple[tuple[str, int | None], ...] = ()  # inlined: (function, line of its call), innermost first
    extra: dict = field(default_factory=dict)

    @property
    def type(self) -> str:
        return self.types[-1] if self.types else "b32"


def immediate_bits(text: str, type_: str) -> int | float:
    """The value of an immediate written in PTX (``0f3F800000``, ``0d...``, ``-8``, ``0x10``)."""
    neg = text.startswith("-")
    body = text[1:] if neg else text
    if body[:2] in ("0f", "0F", "0d", "0D"):
        raw = int(body[2:], 16)
        value = (
            struct.unpack("<f", raw.to_bytes(4, "little"))[0]
            if body[1] in "fF"
            else struct.unpack("<d", raw.to_bytes(8, "little"))[0]
        )
        return -value if neg else value
    if body.endswith(("U", "u")):
        body = body[:-1]
    value = float(body) if ("." in body or "e" in body) and not body.startswith("0x") else int(body, 0)
    return -value if neg else value


# ----- scheduling -------------------------------------------------------------------
Executor = Callable[[np.ndarray | None], None]  # run(idx): lanes idx (None: every lane of a chunk) run it
# what the scheduler does with an instruction: run its executor (PURE: registers only, so a
# converged chunk may run it over every lane; SIDE: memory, warps, output or an abort, only
# over the lanes that execute it), branch, exit, or wait at a barrier
PURE, SIDE, BRA, EXIT, BAR = range(5)
RUN, WAIT, DONE = 0, 1, 2  # the state of a lane
BIG = np.int64(1 << 40)  # the PC of lanes that wait or have exited
