#!/usr/bin/env bash
# The emulator's outputs against the H200's, bit for bit (bench/bit_exact.py): every reference and
# student variant on the aligned, ragged and safety cases. Results: bench/results/bit-exact.md.
# Carried folders: .whl (setup.sh's wheels and PyCUDA, built or as a wheel).
set -uo pipefail
OUT=${OUT:-/tmp/bit-exact-out}
source bench/device/setup.sh
section "bit_exact.py"
"$PY" bench/bit_exact.py --out "$OUT" "$@"
