"""Compiles started before they are asked for, on the cores a grading's emulator leaves idle.

A grading's emulator worker compiles each program as it first launches it, in turn with its
launches: a student's whole course is 22 NVRTC compiles (one for each kernel and define set,
ptxas included), about 3.5 s of an 8 s grading on two cores, while the worker's one thread
leaves the second core idle. So the grading names, as it starts, every program it will compile
(``pipeline.programs_ahead``), and the worker compiles them here ahead of need, as many at a
time as it has cores beside its own (none on one core: nothing then changes), each a
:class:`compile_child.Child` like any compile, with the worker's memory limit. A compile asked
for (``compiler._compile``) takes its child's answer, waiting for the rest if it is running and
letting it go at once if its turn has not come: no compile is made twice, and none waits behind
another. The answers go where any compile's go (the process's memory and the machine's compile
cache), so what a grading reads is the same.

Every child is forked as the compiles are named, held until its turn (``Child(held=True)``):
a fork write-protects every page of its parent, whose next write to each then faults (and is
copied while the child lives), so a fork costs the parent in proportion to its size. Forked at
the grading's start, while the worker is small, the children cost it few faults: the whole
course, every compile the student's and the reference's, took 70 000 page faults and 0.3-0.4 s
of system time in the worker against 365 000 and 0.8-0.9 with each compile forked as it was
asked for, and 120 000 more than that (0.7 s more CPU) when the children were forked one by one
as slots freed (2-core VM, 2026-12-04: ``bench/results/grading-speed.md``).

The worker moves the queue on (:func:`advance`) as each call starts: it reads what the running
children wrote and lets the next ones go as slots free. What is still held or running when the
worker closes is stopped (:func:`stop`): a compile never asked for costs a core, not time.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Any

from autograder.backends.compile_child import Child
from autograder.contract import Program

Key = tuple[Program, str]  # a program and the architecture it is compiled for
# One slot keeps ahead of a worker on two cores (a course's compiles take less time than its
# launches); more would only add compiles' memory (up to 370 MB each, cooperative_groups) on a
# machine whose other cores already grade other submissions (a batch's CPU tasks).
MOST = 2

_held: dict[Key, Child[Any]] = {}  # forked, waiting for their turn, in the order the grading asks for them
_running: dict[Key, Child[Any]] = {}  # let go: compiling, or done and not yet asked for


@functools.cache
def slots() -> int:
    """How many compiles run ahead at once: the cores this process may use, but one (its own),
    and at most ``MOST`` (asked once: :func:`advance` runs at every launch)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(cores - 1, MOST) if hasattr(os, "fork") else 0


def schedule(keys: Iterable[Key], compile_: Callable[[Program, str], object]) -> None:
    """Fork a held compile by ``compile_`` of each of ``keys``, and let as many go as there are
    slots. They replace what an earlier call named and was never asked for (a worker that grades
    one submission after another: ``selfcheck``, the GPU service), which is stopped."""
    stop()
    if slots() <= 0:
        return
    for key in dict.fromkeys(keys):
        _held[key] = Child(compile_, *key, held=True)
    advance()


def advance() -> None:
    """Read what the running compiles have written, and let held ones go in the free slots."""
    busy = sum(not child.poll() for child in _running.values())
    while _held and busy < slots():
        key = next(iter(_held))
        _running[key] = _held.pop(key)
        _running[key].go()
        busy += 1


def take(key: Key) -> Child[Any] | None:
    """The compile of ``key``, no longer ahead's, for its caller to wait for (let go now if it was
    held); None when it was never named."""
    child = _held.pop(key, None) or _running.pop(key, None)
    if child is not None:
        child.go()
    return child


def stop() -> None:
    """Stop every compile still held or running."""
    for children in (_held, _running):
        while children:
            children.popitem()[1].kill()
