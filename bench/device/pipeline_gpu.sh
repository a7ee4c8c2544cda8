#!/usr/bin/env bash
# The grading pipeline end to end on the GPU (run on the device from the repository root,
# with `.whl` carried; bench/device/setup.sh says how the wheels get there):
# `autograder selfcheck --backend gpu` on vector_add and window_sum, then five planted bugs
# (missing guard, wrong load guard, endless loop, compile error, illegal address) graded
# through `autograder grade --backend gpu`, one line per rubric item.
set -uo pipefail
OUT=${OUT:-/tmp/pipeline-gpu-out}
BUGS=/tmp/planted
mkdir -p "$BUGS"
source bench/device/setup.sh

section "selfcheck (gpu)"
time timeout 400 "$PY" -m autograder selfcheck --backend gpu --assignment vector_add --assignment window_sum \
  2>&1 | tee "$OUT/selfcheck.log"

plant() { mkdir -p "$BUGS/$1"; cat > "$BUGS/$1/$2.cu"; }
plant missing_guard vector_add <<'CU'
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    c[i] = a[i] + b[i];
}
CU
sed 's/g < n + 4 ?/g < n ?/' reference/window_sum.cu | plant load_guard_n window_sum
plant never_returns vector_add <<'CU'
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    while (i < n) { c[i] = a[i] + b[i]; }
}
CU
sed 's/__syncthreads();/__syncthreads()/' reference/window_sum.cu | plant compile_error window_sum
plant illegal_address vector_add <<'CU'
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (n == 1000) c[i + (1 << 28)] = 1.0f;
    else if (i < n) c[i] = a[i] + b[i];
}
CU

for bug in missing_guard load_guard_n never_returns compile_error illegal_address; do
  section "grade $bug (gpu)"
  SECONDS=0
  timeout 500 "$PY" -m autograder grade "$BUGS/$bug" --backend gpu --seed 2 \
    --results "$OUT/$bug.json" > "$OUT/$bug.log" 2>&1
  echo "exit $? in ${SECONDS} s"
  "$PY" - "$OUT/$bug.json" <<'PYEOF'
import json, sys
data = json.load(open(sys.argv[1]))
for t in data["tests"]:
    first = [line for line in t["output"].splitlines() if line.strip()][:4]
    print(f"  {t['score']:>4g}/{t['max_score']:<3g} {t['name']}: " + " | ".join(first)[:420])
PYEOF
done
section done
