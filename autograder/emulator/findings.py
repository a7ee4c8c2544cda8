"""Collect diagnosed defects during a launch and collapse identical ones.

Findings with the same (kind, line, array) collapse into the first one seen, and ``others``
counts the other threads that had it, so a bug in every thread reads as one finding."""

from __future__ import annotations

from dataclasses import replace

from autograder.backends.base import Finding

MAX_KEYS = 200  # distinct findings kept per launch; the rest only add to ``others``


class FindingLog:
    def __init__(self, filename: str):
        self.filename = filename
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
        return f"{self.filename}:{line}" if line else self.filename

    def findings(self) -> list[Finding]:
        return [replace(f, others=self._others[k]) for k, f in self._first.items()]

    def __bool__(self) -> bool:
        return bool(self._first)


def dim3(linear: int, dims: tuple[int, int, int]) -> tuple[int, int, int]:
    x, y, _z = dims
    return (linear % x, (linear // x) % y, linear // (x * y))


def fmt3(d: tuple[int, int, int]) -> str:
    return f"({d[0]},{d[1]},{d[2]})"
