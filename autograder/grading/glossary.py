"""Plain words for the terms of a student's feedback: each term an item's output uses is
explained once, on a line of its own under the first line that uses it.

The terms are the emulator's (shared memory checked in 4-byte words, an instruction budget,
PTX's state spaces) and the counted metrics of traffic and performance items
(``global_load_sectors``, ``shared_load_wavefronts``, ...; ``Counters`` in ``backends/base.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from autograder.contract import COUNTER_NAMES

_WHAT = {
    "requests": "how many {verb} instructions on {space} memory the warps execute, each counted once "
    "per warp (a warp is 32 threads that run one instruction together)",
    "bytes": "how many bytes the kernel {moves} {space} memory, summed over all threads",
    "values": "how many of the assignment's values (its floats, halves, ...) the kernel {moves} {space} "
    "memory, summed over all threads: the bytes moved over the size of one, whatever type the kernel "
    "moves them as",
    "sectors": "how many 32-byte sectors of {space} memory the {verb}s touch: a warp's request moves whole "
    "sectors, so neighbouring threads reading neighbouring addresses need the fewest",
    "wavefronts": "how many passes {space} memory needs to serve the warps' {verb}s: one per request when "
    "its 32 threads use 32 different banks, more for each bank conflict (see the handout)",
    "conflicts": "the extra passes (wavefronts) that bank conflicts add to {space}-memory {verb}s "
    "(see the handout)",
}
_INSTRUCTIONS = {
    "lane_instructions": "instructions executed, counted once per thread",
    "warp_instructions": "instructions executed, counted once per warp (32 threads that run one "
    "instruction together)",
}


def _counter(match: re.Match[str]) -> str:
    name = match.group(0)
    if name in _INSTRUCTIONS:
        return _INSTRUCTIONS[name]
    space, kind, what = name.split("_")
    moves = "loads from" if kind == "load" else "stores to"
    return _WHAT[what].format(space=space, verb=kind, moves=moves)


_TERMS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (
        re.compile(r"(?<=\()as 4-byte words(?=\))"),
        lambda _: (
            "shared memory is checked in 4-byte words, so the index counts 4-byte words from "
            "the array's start: the element index of a float or int array, twice it for a double array"
        ),
    ),
    (
        re.compile(r"(?<=\()as bytes(?=\))"),
        lambda _: (
            "the index counts bytes from the array's start (the kernel accesses shared memory "
            "in pieces smaller than 4 bytes)"
        ),
    ),
    (
        re.compile(r"budget of [\d,]+ instructions"),
        lambda _: (
            "instructions are counted once per thread; the budget is many times what the reference "
            "kernel needs on the same case, so a kernel that reaches it is almost always in an endless loop"
        ),
    ),
    (
        re.compile(r"state space"),
        lambda _: "PTX's word for a kind of memory: global, shared, local, constant or parameter",
    ),
    (
        re.compile(r"\boccupancy \d+ %"),
        lambda _: (
            "the share of an SM's 64 warp slots your blocks fill at once; the compiler's registers per "
            "thread and your shared memory per block decide how many blocks fit (autograder profile shows it)"
        ),
    ),
    (
        re.compile(r"\bspilled [\d,]+ bytes"),
        lambda _: (
            "values the compiler could not keep in registers go to local memory, which is as slow as "
            "global memory; autograder profile shows the registers and spills"
        ),
    ),
    (re.compile(r"\b(?:" + "|".join(n for n in COUNTER_NAMES if "_" in n) + r")\b"), _counter),
)


def explained(text: str) -> str:
    """``text`` with each term it uses explained once, indented under its first line that uses it."""
    lines = text.split("\n")
    notes: dict[int, list[str]] = {}
    for term, explanation in _TERMS:
        first = next(((k, m) for k, line in enumerate(lines) if (m := term.search(line))), None)
        if first:
            k, match = first
            notes.setdefault(k, []).append(f'("{match.group(0)}": {explanation(match)})')
    out = []
    for k, line in enumerate(lines):
        out.append(line)
        indent = line[: len(line) - len(line.lstrip())] + "  "
        out += [indent + note for note in notes.get(k, [])]
    return "\n".join(out)
