"""What the compiler gave a kernel, without a GPU: registers per thread, spills, local memory,
static shared memory and barriers, from ptxas's verbose report on NVRTC's cubin for a target
GPU (``compiler.compile_cubin``, read by ``compiler.ptxas_figures``), and the theoretical
occupancy they allow for a launch geometry (``backends/occupancy.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autograder.backends.compiler import compile_cubin, ptxas_figures
from autograder.contract import Program
from autograder.device import DEVICES, Occupancy, occupancy
from autograder.feedback import counted


@dataclass(frozen=True)
class Resources:
    arch: str
    registers: int  # per thread
    spill_stores: int  # bytes per thread
    spill_loads: int
    stack_frame: int  # bytes of local memory per thread (local arrays and spills)
    static_shared: int  # bytes per block
    barriers: int

    def occupancy(self, threads: int, dynamic_shared: int = 0) -> Occupancy:
        """The theoretical occupancy of blocks of ``threads`` with this much dynamic shared memory."""
        return occupancy(
            DEVICES[self.arch], threads, self.static_shared, dynamic_shared, self.registers, self.barriers
        )


def kernel_resources(program: Program, arch: str = "sm_90") -> Resources:
    """The resources ptxas gave ``program``'s kernel for ``arch`` (a CompileError if it does not
    compile; a ValueError for an arch the occupancy rules do not know)."""
    if arch not in DEVICES:
        raise ValueError(f"no occupancy rules for {arch}; known: {', '.join(DEVICES)}")
    compiled = compile_cubin(program, arch)
    return parse_report(compiled.log, compiled.lowered_name, arch)


def parse_report(report: str, kernel: str, arch: str) -> Resources:
    """The figures of entry function ``kernel`` in ptxas's verbose ``report`` (0 where absent)."""
    return Resources(arch=arch, **ptxas_figures(report, kernel))


def launch_resources(program: Program, threads: int, dynamic_shared: int, arch: str) -> dict[str, Any]:
    """``program``'s resources on ``arch`` and the occupancy of its launch, as ``profile`` shows
    them (a dict for ``--json``; ``describe`` words it)."""
    found = kernel_resources(program, arch)
    held = found.occupancy(threads, dynamic_shared)
    return {
        "resources": asdict(found),
        "occupancy": {
            "device": held.device.name,
            "threads_per_block": threads,
            "dynamic_shared_bytes": dynamic_shared,
            "blocks_per_sm": held.blocks_per_sm,
            "warps_per_sm": held.warps_per_sm,
            "of_warps": held.device.warps_per_sm,
            "fraction": held.fraction,
            "limits": held.limits,
            "limiting": list(held.limiting),
        },
    }


def describe(data: dict[str, Any]) -> str:
    """``launch_resources``' figures in a few lines a student reads."""
    r, o = data["resources"], data["occupancy"]
    spills = r["spill_stores"] + r["spill_loads"]
    lines = [
        f"Resources (ptxas for {r['arch']}): {counted(r['registers'], 'register')} a thread, "
        + (
            f"{r['spill_stores']:,} bytes spilled to local memory and {r['spill_loads']:,} read back"
            if spills
            else "no spills"
        )
        + f", {r['stack_frame']:,} bytes of local memory a thread, {r['static_shared']:,} bytes of "
        f"static shared memory, {counted(r['barriers'], 'barrier')}.",
        f"Occupancy on {o['device']}, blocks of {o['threads_per_block']:,} threads"
        + (
            f" and {o['dynamic_shared_bytes']:,} bytes of dynamic shared memory"
            if o["dynamic_shared_bytes"]
            else ""
        )
        + f": {counted(o['blocks_per_sm'], 'block')} an SM, {o['warps_per_sm']} of its {o['of_warps']} warps "
        f"({100 * o['fraction']:.0f} %), limited by {' and '.join(o['limiting'])}.",
        "  blocks an SM by each resource: "
        + ", ".join(f"{name} {blocks}" for name, blocks in o["limits"].items()),
    ]
    return "\n".join(lines)
