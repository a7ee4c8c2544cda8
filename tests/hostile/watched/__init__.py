"""Kernels that try to tell the emulator from a GPU ("am I watched?"), and what holds of
each on both.

Every ``*.cu`` here defines ``watched(unsigned long long* v, const float* a, const float* b)``,
launched alike (``launch``). Its header names what it stores in ``v`` (``// values: a b``
names ``v[0]``, ``v[1]``), the properties that hold on an H200 as on the emulator
(``// holds: EXPR``, a Python expression over those names), and the finding the emulator
reports, if it must (``// finding: KIND``). ``tests/hostile/test_recognise_emulator.py``
runs them on the emulator; ``bench/device/watched.py`` on the GPU beside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autograder.contract import Buffer, Launch, LaunchResult, Program

HERE = Path(__file__).parent
GRID, BLOCK, DYNAMIC_SHARED = (4, 1, 1), (64, 1, 1), 3000
ELEMENTS = 1000  # of a and b: 4000 bytes each
SLOTS = 16  # of v


def signed(x: int) -> int:
    """``x`` as a signed 64-bit number (pointer differences)."""
    return x - (1 << 64) if x >= 1 << 63 else x


@dataclass(frozen=True)
class Watched:
    name: str
    source: str
    values: tuple[str, ...]
    holds: tuple[str, ...]
    finding: str | None

    def launch(self) -> Launch:
        rng = np.random.default_rng(0)
        args = (
            Buffer("v", np.zeros(SLOTS, np.uint64), True),
            Buffer("a", rng.random(ELEMENTS, np.float32)),
            Buffer("b", rng.random(ELEMENTS, np.float32)),
        )
        program = Program(self.source, f"{self.name}.cu", "watched")
        return Launch(program, GRID, BLOCK, args, DYNAMIC_SHARED)

    def read(self, result: LaunchResult) -> dict[str, int]:
        return dict(zip(self.values, (int(x) for x in result.outputs["v"]), strict=False))

    def check(self, values: dict[str, int]) -> dict[str, bool]:
        """Each property's truth on these values."""
        names = {"signed": signed, **values}
        return {expression: bool(eval(expression, {}, names)) for expression in self.holds}


def _header(source: str, key: str) -> list[str]:
    prefix = f"// {key}: "
    return [line.removeprefix(prefix).strip() for line in source.splitlines() if line.startswith(prefix)]


def watched(path: Path) -> Watched:
    source = path.read_text()
    (values,) = _header(source, "values")
    holds = tuple(_header(source, "holds"))
    return Watched(path.stem, source, tuple(values.split()), holds, *_header(source, "finding") or [None])


def kernels() -> list[Watched]:
    return [watched(path) for path in sorted(HERE.glob("*.cu"))]
