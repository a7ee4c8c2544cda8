"""A roofline picture of a kernel, from the emulator's counts (``autograder profile --plot``).

Arithmetic intensity is the counted flops over the bytes the kernel's global loads and stores
request, in 32-byte sectors (``global_*_sectors``), so uncoalesced access lowers it as it does on
a GPU; caches are not modelled, so a kernel whose reloads hit L1 or L2 sits further right on a
GPU than here. The roof is the target GPU's: attainable performance at
intensity ``I`` is ``min(flops peak, I x bandwidth)``. For the H200 the bandwidth is the
measured copy bandwidth (4.14 TB/s, ``docs/gpu-facts.md``) and the flop peak the datasheet's
FP32 rate without tensor cores (67 TFLOP/s); a tensor-core kernel can pass that line. The
student's and the reference's kernels are points on their intensity, placed at the roof they
could reach (the emulator measures no time). matplotlib draws it (the ``batch`` extra), without
pyplot; each point carries an SVG id (``student``, ``reference``) so that a test finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SECTOR = 32
PEAKS = {"sm_90": (67e12, 4.14e12)}  # FP32 flop/s without tensor cores, bytes/s (docs/gpu-facts.md)
STYLES = {
    "student": {"marker": "o", "markersize": 15, "markerfacecolor": "none", "markeredgewidth": 2},
    "reference": {"marker": "s", "markersize": 7},
}


@dataclass(frozen=True)
class Point:
    label: str  # "student" or "reference"
    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


def point(label: str, totals: dict) -> Point:
    """A kernel's point from its counter totals."""
    sectors = totals.get("global_load_sectors", 0) + totals.get("global_store_sectors", 0)
    return Point(label, totals.get("flops", 0), sectors * SECTOR)


def attainable(intensity: float, arch: str) -> float:
    peak, bandwidth = PEAKS[arch]
    return min(peak, intensity * bandwidth)


def draw(points: list[Point], arch: str, path: Path, title: str) -> None:
    """Save the roofline of ``arch`` with ``points`` at ``path`` (SVG or PNG, by its suffix)."""
    picture(points, arch, title).savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)


def picture(points: list[Point], arch: str, title: str):
    """The roofline of ``arch`` with ``points``, a matplotlib ``Figure`` (no pyplot state)."""
    from matplotlib.figure import Figure  # the batch extra; `profile --plot` says so when missing

    peak, bandwidth = PEAKS[arch]
    ridge = peak / bandwidth
    shown = [p for p in points if p.flops and p.bytes]
    low = min([ridge / 100, *(p.intensity / 4 for p in shown)])
    high = max([ridge * 100, *(p.intensity * 4 for p in shown)])
    figure = Figure(figsize=(6.4, 4.2))
    axes = figure.add_subplot()
    roof = f"roof: {bandwidth / 1e12:.2f} TB/s x intensity, at most {peak / 1e12:.0f} TFLOP/s (FP32)"
    axes.loglog([low, ridge, high], [low * bandwidth, peak, peak], color="black", linewidth=1.5, label=roof)
    for p in shown:  # the student's ring stays visible around the reference's square where they meet
        style = STYLES.get(p.label, {"marker": "^", "markersize": 9})
        drawn = axes.plot(
            [p.intensity], [attainable(p.intensity, arch)], linestyle="none", label=p.label, **style
        )
        drawn[0].set_gid(p.label)
    axes.set_xlabel("arithmetic intensity (flops per byte of global memory, 32-byte sectors)")
    axes.set_ylabel("attainable flop/s")
    axes.set_title(title, fontsize=10)
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(True, which="major", alpha=0.3)
    figure.tight_layout()
    return figure
