"""What aborts a whole launch on a GPU: ``trap`` (``__trap()``, ``asm("trap;")``) and a failed
``assert`` (NVRTC compiles it to a call of ``__assertfail``). Either raises
:class:`LaunchFailure` naming the source line, the thread and its block, as the first lane
(lowest linear thread of the lowest block) that executes it; the launch's outputs are lost,
as the GPU's are ("unspecified launch failure")."""

from __future__ import annotations

from autograder.contract import LaunchFailure
from autograder.emulator.access import read_bytes
from autograder.emulator.isa import Executor, Instr

MAX_ASSERT_TEXT = 1024


def build_trap(ins, ch):
    where = ch.m.log.where(ins.line)

    def run(idx):
        lane = _first(ch, idx)
        raise LaunchFailure(
            f"{where}: {ch.who(lane)} executed a trap, which aborts the whole kernel on a GPU"
        )

    return run


def build_assertfail(ins: Instr, ch, params: list[str]) -> Executor:
    """``__assertfail(message, file, line, function, char size)``: the arguments are the
    registers of the call's ``.param`` slots, in order."""
    message, file, line, function = (ch.registers.reg(p) for p in params[:4])

    def run(idx):
        lane = _first(ch, idx)

        def text(reg):
            raw = read_bytes(ch, lane, int(reg[lane]), MAX_ASSERT_TEXT)
            return raw.split(b"\0", 1)[0].decode(errors="replace")

        source_line = int(line[lane]) & 0xFFFFFFFF or ins.line
        where = _where(ch, text(file), source_line)
        raise LaunchFailure(
            f"{where}: {ch.who(lane)} failed an assertion in {text(function)}: "
            f"Assertion `{text(message)}` failed, which aborts the whole kernel "
            "on a GPU"
        )

    return run


def _first(ch, idx) -> int:
    return 0 if idx is None else int(idx[0])


def _where(ch, file: str, line: int | None) -> str:
    """``file:line`` of the assertion: the student's file by its own name, a header by its
    base name."""
    name = file.replace("\\", "/").rsplit("/", 1)[-1] or ch.m.filename
    return f"{name}:{line}" if line else name
