#!/usr/bin/env bash
# Timings for the roofline's timed points (docs/profile.md): the GPU grades the references of
# five assignments and a slow matmul_naive (the swapped-axes variant), each into a TA report under
# $OUT; `autograder profile --plot --timings REPORT.json` draws them anywhere afterwards
# (bench/results/roofline-timed.md). Run on the device from the repository root, `.whl` carried.
set -uo pipefail
OUT=${OUT:-/tmp/roofline-out}
source bench/device/setup.sh
section "grade on the GPU"
for name in vector_add window_sum matmul_naive gemm_tiled matmul_block_tile; do
    "$PY" -m autograder grade reference --assignment "$name" --backend gpu --seed 1 \
        --results "/tmp/$name.json" --report "$OUT/$name" | tail -1
done
mkdir -p /tmp/slow && cp tests/emulator/variants/matmul_naive/slow_swapped_axes.cu /tmp/slow/matmul_naive.cu
"$PY" -m autograder grade /tmp/slow --assignment matmul_naive --backend gpu --seed 1 \
    --results /tmp/slow.json --report "$OUT/matmul_naive-slow" | tail -1
section done
