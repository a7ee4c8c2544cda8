"""The "am I watched?" kernels of tests/hostile/watched/ on the GPU (the grader's gpu backend,
canaries and all) beside the emulator: each property that must hold on both, then every
value each kernel read. Prints the tables and writes them to $OUT/watched.md.

    bash bench/device/watched.sh        # on the device, from the repository root, .whl carried
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hostile.watched import kernels  # noqa: E402

from autograder.backends.emulator import EmulatorBackend  # noqa: E402
from autograder.backends.gpu import GpuBackend  # noqa: E402
from autograder.contract import BackendError  # noqa: E402


def read(backend, kernel) -> dict[str, int] | str:
    """What ``kernel`` stored, or why it did not run."""
    try:
        return kernel.read(backend.launch(kernel.launch()))
    except BackendError as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"


def truth(kernel, values, holds: str) -> str:
    return values if isinstance(values, str) else str(kernel.check(values)[holds])


def shown(values, name: str) -> str:
    return values if isinstance(values, str) else f"{values[name]:#x} ({values[name]})"


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def tables(runs) -> str:
    lines = [row("kernel", "property", "emulator", "GPU"), row(*["---"] * 4)]
    for kernel, emulated, gpu in runs:
        for holds in kernel.holds:
            lines.append(
                row(kernel.name, f"`{holds}`", truth(kernel, emulated, holds), truth(kernel, gpu, holds))
            )
    lines += ["", row("kernel", "value", "emulator", "GPU"), row(*["---"] * 4)]
    for kernel, emulated, gpu in runs:
        lines += [row(kernel.name, name, shown(emulated, name), shown(gpu, name)) for name in kernel.values]
    return "\n".join(lines) + "\n"


def main() -> None:
    emulator, gpu = EmulatorBackend(), GpuBackend()
    try:
        runs = [(kernel, read(emulator, kernel), read(gpu, kernel)) for kernel in kernels()]
    finally:
        gpu.close()
    text = tables(runs)
    print(text)
    out = Path(os.environ.get("OUT", "/tmp/watched-out"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "watched.md").write_text(text)


if __name__ == "__main__":
    main()
