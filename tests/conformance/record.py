"""Record the H200's answers for the conformance suite (``golden/``), in three steps:

    python3 -m tests.conformance.record build DIR      # here: manifest, inputs and sm_90 cubins
    python3 -m tests.conformance.record run DIR OUT    # on the GPU (cupy): every case's outputs
    python3 -m tests.conformance.record adopt OUT      # here: OUT becomes tests/conformance/golden

``bench/device/conformance.sh`` runs the middle step on the device. The cubins come from the
same NVRTC compile as the emulator's PTX (``compiler.compile_cubin``), so both run one program.
The golden files hold every case's outputs (npz, one per module) and ``golden/meta.json``: the
device, driver, date and NVRTC, and each module's digest (its source and inputs): a module
whose digest changed must be recorded again."""

from __future__ import annotations

import datetime
import json
import shutil
import sys
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).parent / "golden"


def build(folder: Path) -> None:
    from autograder.backends.compiler import compile_cubin, nvrtc_version
    from autograder.contract import Program

    from .suite import all_modules, initial, manifest

    folder.mkdir(parents=True, exist_ok=True)
    modules = all_modules()
    for module in modules:
        compiled = compile_cubin(Program(module.source, f"{module.name}.cu", module.cases[0].kernel), "sm_90")
        (folder / f"{module.name}.cubin").write_bytes(compiled.cubin)
        arrays = {f"{c.name}|{n}": a for c in module.cases for n, a in c.inputs}
        arrays |= {f"{c.name}|{o.name}": initial(c, o) for c in module.cases for o in c.outputs}
        np.savez_compressed(folder / f"{module.name}.npz", **arrays)
    digests = {m.name: m.digest() for m in modules}
    (folder / "manifest.json").write_text(manifest(modules))
    (folder / "digests.json").write_text(json.dumps({"nvrtc": list(nvrtc_version()), "modules": digests}))
    print(f"{len(modules)} modules, {sum(len(m.cases) for m in modules)} cases in {folder}")


def run(folder: Path, out: Path) -> None:
    """On the GPU: every case launched once from its cubin, outputs saved per module."""
    import cupy

    from .suite import dims

    out.mkdir(parents=True, exist_ok=True)
    for entry in json.loads((folder / "manifest.json").read_text()):
        module = cupy.RawModule(path=str(folder / f"{entry['module']}.cubin"))
        stored = np.load(folder / f"{entry['module']}.npz")
        results = {}
        for case in entry["cases"]:
            function = module.get_function(case["kernel"])
            arrays = [cupy.asarray(stored[f"{case['name']}|{name}"]) for name in case["inputs"]]
            outputs = [
                cupy.asarray(stored[f"{case['name']}|{name}"]) for name, _dtype, _size in case["outputs"]
            ]
            grid, block = dims(case["grid"]), dims(case["block"])  # JSON gives lists
            function(grid, block, (*arrays, *outputs), shared_mem=case["shared_bytes"])
            cupy.cuda.runtime.deviceSynchronize()
            for (name, _dtype, _size), array in zip(case["outputs"], outputs, strict=True):
                results[f"{case['name']}|{name}"] = cupy.asnumpy(array)
        np.savez_compressed(out / f"{entry['module']}.npz", **results)
        print(entry["module"], len(entry["cases"]), "cases", flush=True)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    meta = json.loads((folder / "digests.json").read_text())
    meta |= {
        "device": props["name"].decode(),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1))


def adopt(out: Path) -> None:
    GOLDEN.mkdir(exist_ok=True)
    for path in GOLDEN.glob("*"):
        path.unlink()
    for path in out.glob("*"):
        if path.suffix in (".npz", ".json"):
            shutil.copy(path, GOLDEN / path.name)
    print(f"golden files from {out}: {sorted(p.name for p in GOLDEN.glob('*'))}")


if __name__ == "__main__":
    command, *paths = sys.argv[1:]
    {"build": build, "run": run, "adopt": adopt}[command](*map(Path, paths))
