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

Imports run one way, none inside a function; each module imports only modules below it:
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

from autograder.contract import Launch, LaunchResult
from autograder.emulator.machine import DEFAULT_BUDGET, Machine


def emulate(ptx: str, lowered_name: str, launch: Launch, budget: int = DEFAULT_BUDGET) -> LaunchResult:
    """Run ``launch`` on the kernel ``lowered_name`` of ``ptx``; buffers are copied, not changed."""
    machine = Machine(ptx, lowered_name, launch, budget)
    machine.run()
    return LaunchResult(
        outputs=machine.outputs(),
        findings=machine.log.findings(),
        counters=machine.counters(),
        stdout="".join(machine.stdout),
    )


__all__ = ["emulate"]
