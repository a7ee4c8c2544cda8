#!/usr/bin/env bash
# Registers and occupancy without a GPU against the H200's driver (bench/occupancy_gpu.py).
# Results: bench/results/occupancy.md. Carried folders: .whl (setup.sh's wheels).
set -uo pipefail
OUT=${OUT:-/tmp/occupancy-out}
source bench/device/setup.sh
section "occupancy_gpu.py"
"$PY" bench/occupancy_gpu.py
