#!/usr/bin/env bash
# The "am I watched?" kernels (tests/hostile/watched/) on the GPU beside the emulator: each
# property that must hold on both, each value read (bench/device/watched.py). Run on the device
# from the repository root with `.whl` carried (PyCUDA, as for the other device scripts);
# under a minute. The table goes to $OUT/watched.md.
set -uo pipefail
OUT=${OUT:-/tmp/watched-out}
source bench/device/setup.sh

section "watched kernels: emulator beside the GPU"
timeout 110 "$PY" bench/device/watched.py
section done
