#!/usr/bin/env bash
# Which NVRTC the grader loads on the device when the project is installed as users install it
# (setup.sh: a venv, pip), and whether that NVRTC's sm_90 cubins load and run on the driver
# there: the version, the libnvrtc files mapped into the process, then tests/gpu.
# Two calls of one warm machine (setup.sh says why): carry `.whl-nvrtc` and run
# `cp -r .whl-nvrtc /tmp/wheels-nvrtc`, then carry `.whl` and run this script.
set -uo pipefail
OUT=${OUT:-/tmp/pinned-nvrtc-out}
source bench/device/setup.sh

section "the NVRTC loaded"
"$PY" - <<'PY'
from autograder.backends import compiler
from autograder.contract import Program

source = "__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }"
print("nvrtc_version", compiler.nvrtc_version(), "problem:", compiler.nvrtc_problem() or "none (pinned)")
print("cubin bytes", len(compiler.compile_cubin(Program(source, "k.cu", "k"), "sm_90").cubin))
with open("/proc/self/maps") as maps:
    print("\n".join(sorted({line.split()[-1] for line in maps if "libnvrtc" in line})))
PY

section "tests/gpu"
timeout "${TESTS_S:-150}" "$PY" -m pytest -p no:cacheprovider -q tests/gpu 2>&1 | tee "$OUT/pytest-gpu.log" | tail -8
section done
