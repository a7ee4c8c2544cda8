#!/usr/bin/env bash
# Why some performance ratios spread more than others (issue 27): bench/timing_spread.py on the
# device, from the repository root with `.whl` carried (bench/device/setup.sh says how).
set -uo pipefail
OUT=${OUT:-/tmp/timing-spread-out}
source bench/device/setup.sh
section "timing spread"
timeout 520 "$PY" bench/timing_spread.py "$@" --out "$OUT/timing-spread.json" 2>&1 | tee "$OUT/timing-spread.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
section "tests/gpu/test_timing.py"
timeout 200 "$PY" -m pytest -p no:cacheprovider -o addopts="" -q tests/gpu/test_timing.py 2>&1 | tail -5
