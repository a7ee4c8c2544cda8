"""A roofline picture of a kernel, from the emulator's counts (``autograder profile --plot``).

Arithmetic intensity is the counted flops over the bytes the kernel's global loads and stores
request, in 32-byte sectors (``global_*_sectors``), so uncoalesced access lowers it as it does on
a GPU; caches are not modelled, so a kernel whose reloads hit L1 or L2 sits further right on a
GPU than here. The roof is the target GPU's: attainable performance at
intensity ``I`` is ``min(flops peak, I x bandwidth)``. For the H200 the bandwidth is the
measured copy bandwidth (4.14 TB/s, ``docs/gpu-facts.md``) and the flop peak the datasheet's
FP32 rate without tensor cores (67 TFLOP/s); a tensor-core kernel can pass that line. The
student's and the reference's kernels are points on their intensity, placed at the roof they
could reach (the emulator measures no time), counted on the case the title names: by default
``ledger.roofline_case``, the largest graded case with the timed case's tiles.

Where a GPU timed the kernels (a ``metric: time`` item's evidence, from ``grade`` on a GPU or
the GPU service), each also has a filled point at the performance it reached: the spec's flops
on the timed case over the measured median time. The timed case is far too large to count, so
its intensity is counted on its stand-in (``ledger.stand_in``: the largest aligned case with the
same tiles), which the title names, and grown to the timed case by the spec's closed forms where
it gives them (``ledger.timed_scale``: flops, global load and store values; a GEMM stand-in with
K=64 has a far larger share of stores than 4096^3 has). A timed point above the roof is a
kernel whose reloads the caches serve.

matplotlib draws it (the ``plot`` extra, which ``batch`` includes), without pyplot; each point
carries an SVG id (``student``, ``reference``, ``student-measured``, ``reference-measured``) so
that a test finds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SECTOR = 32
PEAKS = {"sm_90": (67e12, 4.14e12)}  # FP32 flop/s without tensor cores, bytes/s (docs/gpu-facts.md)
STYLES = {
    "student": {"marker": "o", "markersize": 15, "markerfacecolor": "none", "markeredgewidth": 2},
    "reference": {"marker": "s", "markersize": 7, "markerfacecolor": "none", "markeredgewidth": 2},
    "student-measured": {"marker": "o", "markersize": 9, "color": "tab:red"},
    "reference-measured": {"marker": "s", "markersize": 6, "color": "tab:green"},
}


@dataclass(frozen=True)
class Point:
    label: str  # "student" or "reference", "-measured" after it for a GPU-timed point
    flops: int
    bytes: int
    achieved: float | None = None  # flop/s a GPU measured; None: the point sits on the roof
    legend: str = ""  # what the legend says, when more than the label

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    def height(self, arch: str) -> float:
        return self.achieved if self.achieved is not None else attainable(self.intensity, arch)


def point(label: str, totals: dict, scale: dict | None = None) -> Point:
    """A kernel's point from its counter totals, each multiplied by its ``scale`` (1 if none:
    ``ledger.timed_scale`` grows a stand-in's counts to its timed case)."""
    scale = scale or {}

    def scaled(counter: str) -> float:
        return totals.get(counter, 0) * scale.get(counter, 1)

    sectors = scaled("global_load_sectors") + scaled("global_store_sectors")
    return Point(label, round(scaled("flops")), round(sectors * SECTOR))


def timed_case(items: list[dict], case: dict | None = None) -> dict | None:
    """The timing record among ``items``' evidence (TA report or class file items) with the
    most work, or the one of ``case``: a case a GPU timed with no wrong launch and the spec's
    flops for it; None where no GPU timed any."""
    records = [
        record
        for item in items
        for record in ((item.get("evidence") or {}).get("ratio") or {}).get("cases") or ()
        if record.get("work_flops") and record.get("student_ms") and not record.get("wrong")
        if case is None or record.get("case") == case
    ]
    return max(records, key=lambda r: r["work_flops"], default=None)


def case_text(case: Mapping) -> str:
    """``{"T": 32, "n": 70}`` -> ``"T=32, n=70"``, as titles name a case."""
    return ", ".join(f"{k}={v}" for k, v in case.items())


def timed_title(title: str, stand_in: Mapping, scaled: bool) -> str:
    """``title`` with the stand-in on which the timed points' intensity was counted."""
    how = f"timed points: intensity counted at {case_text(stand_in)}" + (
        ",\nscaled to the timed case" if scaled else ""
    )
    return f"{title}\n{how}"


def measured(counted: list[Point], record: dict) -> list[Point]:
    """The ``counted`` points (student, reference) as the GPU timed them in ``record``."""
    case = case_text(record["case"])
    points = []
    for p in counted:
        ms = record.get(f"{p.label}_ms")
        if ms:
            achieved = record["work_flops"] / (ms / 1e3)
            legend = (
                f"{p.label}, timed: {achieved / 1e12:.3g} TFLOP/s ({record.get('device', 'GPU')}, {case})"
            )
            points.append(Point(f"{p.label}-measured", p.flops, p.bytes, achieved, legend))
    return points


def attainable(intensity: float, arch: str) -> float:
    peak, bandwidth = PEAKS[arch]
    return min(peak, intensity * bandwidth)


def draw(points: list[Point], arch: str, path: Path, title: str) -> None:
    """Save the roofline of ``arch`` with ``points`` at ``path`` (SVG or PNG, by its suffix)."""
    picture(points, arch, title).savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)


def picture(points: list[Point], arch: str, title: str):
    """The roofline of ``arch`` with ``points``, a matplotlib ``Figure`` (no pyplot state)."""
    from matplotlib.figure import Figure  # the plot extra; `profile --plot` says so when missing

    peak, bandwidth = PEAKS[arch]
    ridge = peak / bandwidth
    shown = [p for p in points if p.flops and p.bytes]
    low = min([ridge / 100, *(p.intensity / 4 for p in shown)])
    high = max([ridge * 100, *(p.intensity * 4 for p in shown)])
    top = max([peak, *(p.height(arch) for p in shown)])
    figure = Figure(figsize=(6.4, 4.2 + 0.2 * len(shown)), layout="constrained")
    axes = figure.add_subplot()
    roof = f"roof: {bandwidth / 1e12:.2f} TB/s x intensity, at most {peak / 1e12:.0f} TFLOP/s (FP32)"
    axes.loglog([low, ridge, high], [low * bandwidth, peak, peak], color="black", linewidth=1.5, label=roof)
    for p in shown:  # the student's ring stays visible around the reference's square where they meet
        style = STYLES.get(p.label, {"marker": "^", "markersize": 9})
        drawn = axes.plot(
            [p.intensity], [p.height(arch)], linestyle="none", label=p.legend or p.label, **style
        )
        drawn[0].set_gid(p.label)
    axes.set_ylim(top=top * 2)
    axes.set_xlabel("arithmetic intensity (flops per byte of global memory, 32-byte sectors)")
    axes.set_ylabel("flop/s (open: the roof's, filled: timed)")
    axes.set_title(title, fontsize=10)
    figure.legend(loc="outside lower center", fontsize=8)  # under the axes: no point hidden
    axes.grid(True, which="major", alpha=0.3)
    return figure
