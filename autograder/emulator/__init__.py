"""A PTX emulator: NVRTC's PTX for a kernel, run with numpy, one lane per CUDA thread.

Pipeline: ``ptx.py`` parses the text, ``inline.py`` inlines the device functions NVRTC
left as calls (``__noinline__``), ``program.py`` decodes it once into instructions
(``program.decode_ptx`` runs these three in order), ``machine.py`` schedules lanes
(minimum-PC) and ``barriers.py`` resolves barriers, ``ops.py`` is the op table,
``access.py`` the memory instructions with their diagnostics, ``memory.py`` the memory
spaces, ``shadow.py`` the race/initialisation shadow of shared memory, ``collective.py``
the warp instructions and printf, ``wmma.py`` the warp matrix instructions,
``mma.py`` the ``mma.sync`` and ``ldmatrix``/``stmatrix`` instructions in the ISA's fragment
layouts, ``rounding.py`` the rounding of float results as an H200 rounds them (directed
modes, flush-to-zero, saturation, fused multiply-adds, NaNs), ``counters.py`` the traffic
counters, ``profile.py`` their report, ``findings.py`` the collapsing of findings,
``special.py`` what each special register reads (as on an H200: ``%clock64`` advances,
``%nsmid`` is 132; nothing tells a kernel it is checked).
``isa.py`` is what they share: PTX's types and their dtypes, the decoded instruction and
its operands, instruction kinds and lane states, the special registers' names.

``aborts.py`` is what aborts a launch (``trap``, a failed ``assert``); ``limits.py`` what an
H200 refuses, each the student's ``CompileError`` (what ptxas refuses for ``sm_90``: a local
frame over 512 KiB, over 48 KiB of ``__shared__`` variables, over 64 KiB of
``__constant__``, a barrier number over 15) or ``LaunchFailure`` (shared memory over 227
KiB, parameters that do not match the launch, ``__device__`` variables over the grader's
256 MiB); ``barriers.py`` refuses a barrier's thread count as the GPU does.

Imports run one way, none inside a function (but this package's ``emulate``, which loads the
machine when first asked for: below); each module imports only modules below it:
``machine.py`` on top, then ``scheduler.py``, ``chunk.py``, ``plan.py`` -> ``shared.py`` -> the op
table; the front end ``program.py`` -> ``inline.py`` -> ``ptx.py``; the op
table ``ops.py`` -> ``collective.py`` -> ``aborts.py`` -> ``access.py`` (and ``wmma.py`` ->
``access.py``, ``mma.py`` -> ``wmma.py``, ``access.py``); ``special.py`` -> ``ptx.py``; ``barriers.py`` ->
``limits.py`` -> ``memory.py``; ``access.py`` -> ``memory.py`` (-> ``shadow.py``),
``counters.py``, ``findings.py``; and ``isa.py`` at the bottom, which imports no other
module of the emulator. An executor gets the chunk it runs on (and through ``chunk.m`` the
``Machine``) as an argument, so nothing below ``machine.py`` imports it.

Known limits: no recursive device functions, calls through function pointers or calls to
functions the module does not define (other than ``printf`` and ``assert``'s
``__assertfail``), no indirect branches (``brx.idx``), no textures/surfaces,
``mma.sync`` only m16n8k*, wmma only m16n16k16 with f16 inputs; grid sync only in a
cooperative launch (``barriers.py``); spin locks on plain loads
inside a block and counted named barriers (see ``machine.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autograder.emulator.machine import emulate


def __getattr__(name: str):
    """``emulate`` (``machine.emulate``: a launch of a kernel's PTX -> ``LaunchResult``), its
    modules imported when it is first asked for: the grader's process imports a leaf of this
    package (``findings.py``) and runs no launch (its worker does), and the machine's modules
    would cost it about 90 ms of every grading (the op table, the PTX grammar)."""
    if name == "emulate":
        from autograder.emulator.machine import emulate

        return emulate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["emulate"]
