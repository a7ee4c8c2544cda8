"""Shows the gpu backend on a real GPU, one row per scenario (run by gpu_backend.sh on the device).

Scenarios: vector_add right on aligned and ragged n; a missing guard caught by the canary;
a write before the start; a compile error with its line; crashes (illegal address,
misaligned, trap) and a kernel that never returns, each failing its launch in the worker
with the next launch run by a fresh worker; a crash and a hang in-process, without a
worker (what they leave behind).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import time

import numpy as np
from gpu_kernels import program, vector_add, vector_add_error

from autograder.backends.compiler import nvrtc_version
from autograder.backends.gpu import GpuBackend, gpu_available
from autograder.backends.worker import WorkerBackend
from autograder.contract import BackendError

ROWS: list[tuple[str, str, str]] = []
RNG = np.random.default_rng()


def row(scenario: str, outcome: str, detail: str = "") -> None:
    ROWS.append((scenario, outcome, detail))
    print(f"{scenario}: {outcome} {detail}", flush=True)


def outcome_of(backend, stem: str, n: int, time_limit_s: float = 20.0) -> tuple[str, str]:
    launch = vector_add(stem, n, RNG, time_limit_s)
    started = time.perf_counter()
    try:
        result = backend.launch(launch)
    except BackendError as e:
        return type(e).__name__, f"{str(e).splitlines()[-1]} [{time.perf_counter() - started:.2f} s]"
    findings = "; ".join(f.message for f in result.findings) or "no findings"
    error = vector_add_error(launch, result.outputs)
    return f"max err {error:.1e}", f"{findings}; kernel {result.elapsed_ms:.3f} ms"


def environment(gpu: GpuBackend) -> None:
    import pycuda
    import pycuda.driver as cuda

    row("device", gpu.device_name, f"{gpu.arch}, driver API {cuda.get_driver_version()}")
    row(
        "software",
        f"NVRTC {'.'.join(map(str, nvrtc_version()))}",
        f"PyCUDA {pycuda.VERSION_TEXT}, "
        f"cuda-bindings {importlib.metadata.version('cuda-bindings')}, gpu_available()={gpu_available()}",
    )


def compile_times(gpu: GpuBackend) -> None:
    started = time.perf_counter()
    gpu.compile(program("vector_add"))
    first = time.perf_counter() - started
    started = time.perf_counter()
    gpu.compile(program("vector_add"))
    cached = time.perf_counter() - started
    row("compile vector_add", f"{1e3 * first:.0f} ms", f"(NVRTC cubin + load); cached {1e6 * cached:.0f} us")


def answers_and_canaries(gpu: GpuBackend) -> None:
    for n in (1, 10, 1000, 1024, 1_000_003):
        row(f"vector_add n={n}", *outcome_of(gpu, "vector_add", n))
    launch = vector_add("vector_add", 1 << 24, RNG)
    started = time.perf_counter()
    result = gpu.launch(launch)
    row(
        "vector_add n=2^24 wall",
        f"{1e3 * (time.perf_counter() - started):.0f} ms",
        f"with copies and canary checks; kernel {result.elapsed_ms:.3f} ms",
    )
    planted = (("vector_add_unguarded", 1000), ("vector_add_unguarded", 1024), ("vector_add_shifted", 1000))
    for stem, n in planted:
        row(f"{stem} n={n}", *outcome_of(gpu, stem, n))


def compile_error(gpu: GpuBackend) -> None:
    try:
        gpu.compile(program("compile_error"))
    except BackendError as e:
        row("compile_error", type(e).__name__, str(e).splitlines()[1])


def failures_in_worker() -> None:
    worker = WorkerBackend(GpuBackend, "gpu")
    worker.compile(program("vector_add"))  # start the worker first: its start-up is not the kernel's
    for stem, limit_s in (("wild_pointer", 20), ("misaligned", 20), ("trap", 20), ("spin_forever", 2)):
        row(f"{stem} in worker, limit {limit_s} s", *outcome_of(worker, stem, 1000, limit_s))
        row("  next launch", *outcome_of(worker, "vector_add", 1000))
    row("  workers started", str(worker.starts))
    worker.close()


IN_PROCESS = """
import sys
import numpy as np
from autograder.backends.gpu import GpuBackend
from autograder.contract import BackendError
from gpu_kernels import vector_add
gpu = GpuBackend()
for stem in (sys.argv[1], "vector_add"):
    try:
        gpu.launch(vector_add(stem, 1000, np.random.default_rng(), time_limit_s=2))
        print("vector_add ran", flush=True)
    except BackendError as e:
        print(type(e).__name__, e, flush=True)
try:
    GpuBackend()
    print("a second GpuBackend was created", flush=True)
except Exception as e:
    print("a second GpuBackend:", e, flush=True)
gpu.close()
print("closed, exiting", flush=True)
"""


def in_process(stem: str) -> None:
    """The backend alone, without a worker: what a crash or a hang leaves behind."""
    started = time.perf_counter()
    try:
        command = [sys.executable, "-c", IN_PROCESS, stem]
        child = subprocess.run(command, capture_output=True, text=True, timeout=40)
        outcome = f"exit {child.returncode} after {time.perf_counter() - started:.1f} s"
        detail = " | ".join(child.stdout.strip().splitlines() + child.stderr.strip().splitlines()[-2:])
    except subprocess.TimeoutExpired as e:
        outcome = "process still alive after 40 s: killed"
        detail = " | ".join((e.stdout or b"").decode().strip().splitlines())
    row(f"{stem} in-process, limit 2 s", outcome, detail)


def main() -> None:
    gpu = GpuBackend()
    environment(gpu)
    compile_times(gpu)
    answers_and_canaries(gpu)
    compile_error(gpu)
    gpu.close()
    failures_in_worker()
    in_process("wild_pointer")
    in_process("spin_forever")
    print("\n| scenario | outcome | detail |\n|---|---|---|")
    for scenario, outcome, detail in ROWS:
        print(f"| {scenario} | {outcome} | {detail} |")


if __name__ == "__main__":
    main()
