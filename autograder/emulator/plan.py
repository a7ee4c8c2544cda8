"""A chunk's plan: per instruction of its kernel, how the scheduler runs it on the chunk.

An entry is ``(executor, kind, guard)``, made when the scheduler first reaches the instruction
(about 40% of a program's instructions never run in a given launch); branches, exits and
barriers are the scheduler's and have no executor; a small chunk's register-only instructions,
loads and stores run the executors their kernel shares (``shared.Shared``); the others' are
built when they first run (``ops.build_executor``), so that an instruction the scheduler
reaches but no lane runs (a guard none passes) costs nothing to build. On a small chunk a run
of independent fmas or wmma.mmas is one executor (``ops.fma_runs``), built by its first instruction, and
counted for each of its instructions when the chunk's run ends (``tally_runs``). A chunk kept
for the next launch of its shape keeps the entries whose executors hold nothing of a launch
(``keep``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autograder.emulator.counters import Tally
from autograder.emulator.isa import SIDE, Executor, Instr
from autograder.emulator.lanes import Lanes
from autograder.emulator.ops import FUSED_LANES, build_executor, build_run
from autograder.emulator.registers import RegisterFile
from autograder.emulator.shared import Shared

Entry = tuple  # (executor or None, kind, guard or None)


class Plan:
    """The entries of ``program`` (its instructions' ``kinds``) for ``chunk`` (a ``chunk.Chunk``,
    which holds this plan: what its executors are built against) and its ``registers``: ``entries[k]``,
    None until ``entry(k)``, whose executor is the kernel's where ``shared`` (a small chunk's) has
    one (``shared.Shared``); ``runs[k]``: the fmas or wmma.mmas of the run from ``k`` on (0: none);
    ``fused``: the runs' executors by their first instruction; ``ran``: per run run, its lanes
    and warps so far; ``memo_bytes``: what the entries' executors remember of their requests
    (``access.MEMO_BYTES``)."""

    def __init__(
        self,
        chunk: Lanes,
        registers: RegisterFile,
        program: list[Instr],
        kinds: list[int],
        fma_runs: list[int],
        shared: Shared | None,
    ):
        self.ch = chunk
        self.shared = shared
        self.registers = registers
        self.program, self.kinds = program, kinds
        self.entries: list[Entry | None] = [None] * len(program)
        self.runs = fma_runs if chunk.n <= FUSED_LANES else [0] * len(program)
        self.fused: dict[int, Callable[[], None]] = {}  # every lane runs a run of fmas or wmma.mmas
        self.ran: dict[int, list[int]] = {}
        self.memo_bytes = 0

    def entry(self, k: int) -> Entry:
        """Instruction ``k``'s entry, its executor built when it first runs."""
        kind = self.kinds[k]
        guard = self.registers.guard(self.program[k].guard)
        run = None
        if kind <= SIDE:
            run = (self.shared and self.shared.executor(k)) or self._deferred(k)
        entry = self.entries[k] = (run, kind, guard)
        return entry

    def fused_run(self, k: int, span: int) -> Callable[[], None]:
        """The executor of the run ``k .. k + span - 1`` (fmas, or wmma.mmas)."""
        run = self.fused[k] = build_run(self.program[k : k + span], self.ch)
        return run

    def _deferred(self, k: int) -> Executor:
        def first_run(idx) -> None:
            run = build_executor(self.program[k], self.ch)
            self.entries[k] = (run, *self.entries[k][1:])  # type: ignore[index]
            run(idx)

        return first_run

    def tally_runs(self, tally: Tally) -> None:
        """Count the runs (the scheduler ran each as one) for each of their instructions."""
        for first, (lanes, warps) in self.ran.items():
            for k in range(first, first + self.runs[first]):
                tally.lanes[k] += lanes
                tally.warps[k] += warps
        self.ran = {}

    def keep(self, portable: Sequence[bool]) -> None:
        """Keep only the entries whose executors serve the next launch (``machine.portable``)."""
        self.entries = [entry if entry and portable[k] else None for k, entry in enumerate(self.entries)]

    def drop(self) -> None:
        """Drop every executor (closures over the chunk) and the chunk itself, so that nothing
        holds the chunk in a cycle and its arrays are freed now, not when the garbage collector
        next runs."""
        self.entries = []
        self.fused.clear()
        del self.ch
