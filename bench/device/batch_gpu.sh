#!/usr/bin/env bash
# `autograder batch --backend gpu` on the device's H200, under Ray (docs/batch.md), through
# bench/batch_class.py: a class of SIZE (default 12) full submissions (a kernel of each of the
# nine assignments: references, starters, variants, planted bugs), each a GPU task (the timed
# items) and a CPU task (the rest on the emulator). Prints wall time, GPU busy time and
# submissions per GPU-hour (TASKS_PER_GPU: batch's --tasks-per-gpu, default 1); and, sampled
# every half second meanwhile, how busy the GPU was (nvidia-smi's utilization: the share of the
# time a kernel ran) and the host's cores (vmstat), which say whether the GPU or the host limits
# the batch; each submission's TA report is kept in $OUT/reports. Results in
# bench/results/batch-gpu.md. Carried folders: ray_setup.sh.
set -uo pipefail
OUT=${OUT:-/tmp/batch-gpu-out}
source bench/device/ray_setup.sh
nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 >"$OUT/gpu-util.txt" &
smi=$!
vmstat -n 1 >"$OUT/vmstat.txt" &
vm=$!
section "bench/batch_class.py --backend gpu"
timeout "${LIMIT_S:-520}" "$PY" bench/batch_class.py --backend gpu --whole --size "${SIZE:-12}" --sample 0 \
    --tasks-per-gpu "${TASKS_PER_GPU:-1}" --keep "$OUT/reports" 2>&1 | tail -30
kill "$smi" "$vm"
section "utilization while the batch ran"
awk '{n++; s+=$1; if ($1 > 0) busy++} END {printf "GPU: %d samples, mean utilization %.0f %%, a kernel running in %.0f %% of them\n", n, s/n, 100*busy/n}' "$OUT/gpu-util.txt"
awk 'NR > 2 {n++; idle+=$15; wait+=$16} END {printf "host: %d s, cores busy %.0f %% (idle %.0f %%, waiting for I/O %.0f %%)\n", n, 100-idle/n-wait/n, idle/n, wait/n}' "$OUT/vmstat.txt"
