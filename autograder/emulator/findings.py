"""Collect diagnosed defects during a launch and collapse identical ones.

Findings with the same (kind, line, array) collapse into the first one seen, and ``others``
counts the other threads that had it, so a bug in every thread reads as one finding.

A line inside a device function inlined into the kernel (``inline.py``) is named with its
calls, which are what the student fixes: ``kernel.cu:3 (in helper `load_tile`, called
from line 11)``; a helper called from several lines names them all, since a finding is
collapsed by its line."""

from __future__ import annotations

from dataclasses import replace

from autograder.contract import Finding

MAX_KEYS = 200  # distinct findings kept per launch; the rest only add to ``others``


class FindingLog:
    def __init__(self, filename: str, program=()):
        """``program``: the decoded instructions, whose call sites (``Instr.calls``) name
        the calls of a helper's lines."""
        self.filename = filename
        self.program = program
        self._calls: dict[int, str] | None = None  # line -> its helper and calls, made when first asked
        self._first: dict[tuple, Finding] = {}
        self._others: dict[tuple, int] = {}

    def add(self, finding: Finding, count: int = 1) -> None:
        """Record ``finding`` for one thread plus ``count - 1`` others like it."""
        key = (finding.kind, finding.line, finding.array)
        if key in self._first:
            self._others[key] += count
        elif len(self._first) < MAX_KEYS:
            self._first[key] = finding
            self._others[key] = count - 1

    def where(self, line: int | None) -> str:
        return f"{self.filename}:{line}{self.called(line)}" if line else self.filename

    def line(self, line: int | None) -> str:
        """``line 12``, with the calls of a helper's line (``where`` without the file)."""
        return f"line {line}{self.called(line)}"

    def called(self, line: int | None) -> str:
        """`` (in helper `f`, called from line 30)`` for a line of an inlined function, else ""."""
        if self._calls is None:
            chains: dict[int, set] = {}
            for ins in self.program:
                if ins.line:
                    chains.setdefault(ins.line, set()).add(ins.calls)
            self._calls = {line: _called(found) for line, found in chains.items() if () not in found}
        return self._calls.get(line, "")

    def findings(self) -> list[Finding]:
        return [replace(f, others=self._others[k]) for k, f in self._first.items()]

    def __bool__(self) -> bool:
        return bool(self._first)


def _called(chains: set) -> str:
    """The calls of one source line: its helper, and each distinct chain of calls to it."""
    helper = next(iter(chains))[0][0]
    sites = " and ".join(sorted(_chain(chain) for chain in chains))
    return f" (in helper `{helper}`, called from {sites})"


def _chain(chain: tuple) -> str:
    """``line 20 in helper `a`, called from line 30``: a call, and the calls of the helper
    it lies in."""
    (_, line), *outer = chain
    return " ".join([f"line {line}", *(f"in helper `{f}`, called from line {at}" for f, at in outer)])


def dim3(linear: int, dims: tuple[int, int, int]) -> tuple[int, int, int]:
    x, y, _z = dims
    return (linear % x, (linear // x) % y, linear // (x * y))


def fmt3(d: tuple[int, int, int]) -> str:
    return f"({d[0]},{d[1]},{d[2]})"
