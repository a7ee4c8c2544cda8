#!/usr/bin/env bash
# The H200's count of a 16-byte shared load's wavefronts under ncu, pattern by pattern
# (bench/device/bank_phases.py). Run on the device from the repository root.
set -uo pipefail
OUT=${OUT:-/tmp/bank-phases-out}
mkdir -p "$OUT"
python3 bench/device/bank_phases.py | tee "$OUT/patterns.txt"
ncu --clock-control none --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum \
    python3 bench/device/bank_phases.py 2>&1 | tee "$OUT/ncu.txt" | grep -E "wavefronts_mem" | awk '{print NR": "$NF}'
