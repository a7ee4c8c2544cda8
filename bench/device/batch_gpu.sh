#!/usr/bin/env bash
# `autograder batch --backend gpu` on the device's H200, under Ray (docs/batch.md): a class of
# four submissions, each holding all nine kernels (three of the references, one of the
# starters), graded one at a time on the one GPU. Prints the wall time and submissions per
# GPU-hour; results in bench/results/batch-gpu.md. Carried folders: ray_setup.sh.
set -uo pipefail
OUT=${OUT:-/tmp/batch-gpu-out}
source bench/device/ray_setup.sh
class=/tmp/class
rm -rf "$class"
for who in reference-1 reference-2 reference-3 starter; do
    mkdir -p "$class/$who" && cp "${who%-*}"/*.cu "$class/$who/"
done
section "autograder batch --backend gpu"
start=$(date +%s.%N)
timeout 540 "$PY" -m autograder batch "$class" --out "$OUT/class" --backend gpu 2>&1 | tail -15
end=$(date +%s.%N)
"$PY" -c "w = $end - $start; print(f'wall {w:.0f} s for 4 submissions of 9 kernels: {4 / w * 3600:.0f} submissions per GPU-hour')"
cut -d, -f1-4 "$OUT/class/scores.csv"
