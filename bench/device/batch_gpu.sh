#!/usr/bin/env bash
# `autograder batch --backend gpu` on the device's H200, under Ray (docs/batch.md), through
# bench/batch_class.py: a class of SIZE (default 12) full submissions (a kernel of each of the
# nine assignments: references, starters, variants, planted bugs), each a GPU task (the timed
# items) and a CPU task (the rest on the emulator). Prints wall time, GPU busy time and
# submissions per GPU-hour (TASKS_PER_GPU: batch's --tasks-per-gpu, default 1); results in
# bench/results/batch-gpu.md. Carried folders: ray_setup.sh.
set -uo pipefail
OUT=${OUT:-/tmp/batch-gpu-out}
source bench/device/ray_setup.sh
section "bench/batch_class.py --backend gpu"
timeout "${LIMIT_S:-520}" "$PY" bench/batch_class.py --backend gpu --whole --size "${SIZE:-12}" --sample 0 \
    --tasks-per-gpu "${TASKS_PER_GPU:-1}" 2>&1 | tail -30
