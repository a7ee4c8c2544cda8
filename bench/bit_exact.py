"""The emulator's outputs against the GPU's, bit for bit (issue: the emulator runs the CUDA that
people write).

For every reference kernel and every student variant (``tests/emulator/variants``), on every
case of the ``aligned``, ``ragged`` and ``safety`` groups, runs the same launch (same inputs,
same seed, outputs poisoned the same way) on the emulator and on the GPU, and compares every
output buffer element by element as bits. Floating-point elements that differ are measured in
units in the last place (ulps: the distance between the two values' positions in the ordered
sequence of floats of that type), so a difference of 1 is one rounding step. Prints one row per
source with the cases, elements, differing elements and the largest ulp distance, and writes
every comparison as JSON. Results: ``bench/results/bit-exact.md``; run on the device by
``bench/device/bit_exact.sh``.

Usage: python3 bench/bit_exact.py [--seed 7] [--out DIR] [--assignments a,b]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.backends.emulator import EmulatorBackend  # noqa: E402
from autograder.backends.gpu import GpuBackend  # noqa: E402
from autograder.course.cases import GroupCase, prepare  # noqa: E402
from autograder.course.spec import load_specs  # noqa: E402

GROUPS = ("aligned", "ragged", "safety")
ORDERED = {2: np.int16, 4: np.int32, 8: np.int64}


def sources(assignment: str) -> dict[str, str]:
    """The reference and every variant of ``assignment``, by a short name."""
    found = {"reference": (ROOT / f"reference/{assignment}.cu").read_text()}
    for path in sorted((ROOT / f"tests/emulator/variants/{assignment}").glob("*.cu")):
        found[f"variant {path.stem}"] = path.read_text()
    return found


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distance of each pair of floats in ulps (both NaN: 0; one NaN: the largest)."""
    signed = ORDERED[a.dtype.itemsize]
    top = np.iinfo(signed).max

    def ordered(x: np.ndarray) -> np.ndarray:
        bits = x.view(signed).astype(np.int64)
        return np.where(bits < 0, np.int64(np.iinfo(signed).min) - bits, bits)

    distance = np.abs(ordered(a) - ordered(b))
    both, one = np.isnan(a) & np.isnan(b), np.isnan(a) ^ np.isnan(b)
    return np.where(both, 0, np.where(one, top, distance))


def compare(emulated: np.ndarray, native: np.ndarray) -> dict:
    """Elements, how many differ as bits, and for floats the largest distance in ulps and the
    largest difference relative to the output's largest magnitude (an ulp of a value near zero
    after cancellation is tiny, so the ulps alone overstate a difference there)."""
    e, g = np.ravel(emulated), np.ravel(native)
    width = e.dtype.itemsize
    differ = e.view(f"u{width}") != g.view(f"u{width}")
    figures = {"elements": int(e.size), "differ": int(differ.sum()), "max_ulps": 0, "max_relative": 0.0}
    if e.dtype.kind == "f" and differ.any():
        scale = float(np.nanmax(np.abs(g.astype(np.float64)), initial=0.0)) or 1.0
        gap = np.abs(e[differ].astype(np.float64) - g[differ])
        figures["max_ulps"] = int(ulps(e[differ], g[differ]).max())
        figures["max_relative"] = float(np.nanmax(gap, initial=0.0)) / scale
    return figures


def run_case(spec, source: str, ref: GroupCase, backends: dict) -> dict[str, dict]:
    """Each output buffer's comparison; both backends get a fresh launch with the same inputs."""
    results = {
        name: backend.launch(prepare(spec, source, ref, 600).launch) for name, backend in backends.items()
    }
    emulated, native = results["emulator"].outputs, results["gpu"].outputs
    return {name: compare(emulated[name], native[name]) for name in native}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--assignments", default="", help="comma-separated (default: every one)")
    args = parser.parse_args()
    specs = load_specs(ROOT)
    names = args.assignments.split(",") if args.assignments else sorted(specs)
    backends = {"emulator": EmulatorBackend(), "gpu": GpuBackend()}
    print(f"GPU: {backends['gpu'].device_name} ({backends['gpu'].arch})")
    print(
        "| assignment | source | cases | output elements | differing | max ulps "
        "| max difference / max output | where |"
    )
    print("|---|---|---|---|---|---|---|---|")
    records = []
    for assignment in names:
        spec = specs[assignment]
        for label, source in sources(assignment).items():
            rows = []
            for group in GROUPS:
                for index, case in enumerate(spec.cases.get(group, ())):
                    ref = GroupCase(group, index, case, args.seed)
                    for output, figures in run_case(spec, source, ref, backends).items():
                        rows.append({"group": group, "case": dict(case), "output": output, **figures})
            records.append({"assignment": assignment, "source": label, "rows": rows})
            differing = [r for r in rows if r["differ"]]
            where = "; ".join(
                f"{r['group']} {r['case']} {r['output']}: {r['differ']} of {r['elements']}"
                for r in differing[:3]
            )
            print(
                f"| {assignment} | {label} | {len({json.dumps(r['case']) for r in rows})} | "
                f"{sum(r['elements'] for r in rows)} | {sum(r['differ'] for r in rows)} | "
                f"{max((r['max_ulps'] for r in rows), default=0)} | "
                f"{max((r['max_relative'] for r in rows), default=0.0):.2g} | {where} |"
            )
    exact = sum(all(r["differ"] == 0 for r in rec["rows"]) for rec in records)
    print(f"\n{exact} of {len(records)} sources bit-exact on every case")
    args.out.mkdir(parents=True, exist_ok=True)
    figures = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": backends["gpu"].device_name,
        "seed": args.seed,
        "records": records,
    }
    (args.out / "bit-exact.json").write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
