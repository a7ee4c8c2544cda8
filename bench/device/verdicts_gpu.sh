#!/usr/bin/env bash
# The verdicts of kernels that can never score, graded on the GPU as on the emulator (run on
# the device from the repository root, with `.whl` carried; bench/device/setup.sh says how):
# vector_add's starter and a vector_add in attempt1.cu that reads past its end, each through
# `autograder grade --backend gpu`. Every item with its score, its tags and its first lines,
# and whether the summary says points "could not be graded here" (it must not: no GPU could
# give a wrong kernel speed points, so nothing is left for a TA).
set -uo pipefail
OUT=${OUT:-/tmp/verdicts-gpu-out}
SUBS=/tmp/verdicts
source bench/device/setup.sh

mkdir -p "$SUBS/starter" "$SUBS/unguarded_read"
cp starter/vector_add.cu "$SUBS/starter/vector_add.cu"
cat > "$SUBS/unguarded_read/attempt1.cu" <<'CU'
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float after = a[i + 1];  // the next element, read without a guard
    c[i] = a[i] + b[i] + 0.0f * after;
}
CU

for sub in starter unguarded_read; do
  section "grade $sub (gpu)"
  SECONDS=0
  timeout 280 "$PY" -m autograder grade "$SUBS/$sub" --backend gpu --seed 7 --assignment vector_add \
    --results "$OUT/$sub.json" --report "$OUT/$sub-report" > "$OUT/$sub.log" 2>&1
  echo "exit $? in ${SECONDS} s"
  "$PY" - "$OUT/$sub.json" <<'PYEOF'
import json, sys
data = json.load(open(sys.argv[1]))
print("  could not be graded here:", "could not be graded here" in data["output"])
for t in data["tests"]:
    first = [line for line in t["output"].splitlines() if line.strip() and line != "```"][:3]
    print(f"  {t['score']:>4g}/{t['max_score']:<3g} {t['name']} {t['tags']}: " + " | ".join(first)[:600])
PYEOF
done
section done
