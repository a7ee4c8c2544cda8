#!/usr/bin/env bash
# The GPU service on the device's H200 (docs/gpu-service.md): `autograder serve --backend gpu`
# on loopback; every reference through it against local `--backend gpu` grading
# (bench/gpu_service_check.py); then Gradescope's layout: the zip of `autograder gradescope
# --gpu-url`, unpacked in $root/source, run_autograder on the references with the GPU hidden
# from it (as on hosted Gradescope), asking the service. Results: bench/results/gpu-service.md.
# Carried folders: ray_setup.sh (run after batch_gpu.sh on the same warm machine, or alone).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-service-out}
source bench/device/ray_setup.sh
port=8765
"$PY" -c "import secrets; print('gradescope:' + secrets.token_urlsafe(32))" >/tmp/tokens
section "autograder serve --backend gpu"
"$PY" -m autograder serve --port $port --token-file /tmp/tokens --backend gpu 2>"$OUT/serve.log" &
server=$!
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/v1/health" && break; sleep 1; done
echo
section "the references through the service, and locally"
"$PY" bench/gpu_service_check.py --url "http://127.0.0.1:$port" --token-file /tmp/tokens --out "$OUT"
section "run_autograder on Gradescope's layout, the GPU hidden, asking the service"
root=/tmp/gradescope
rm -rf "$root" && mkdir -p "$root/submission" /tmp/bin
"$PY" -m autograder gradescope $(ls assignments) --gpu-url "http://127.0.0.1:$port" \
    --gpu-token-file /tmp/tokens --out /tmp/autograder.zip
"$PY" -m zipfile -e /tmp/autograder.zip "$root/source"
cp reference/*.cu "$root/submission/"
printf '#!/bin/sh\nexec %s -m autograder "$@"\n' "$PY" >/tmp/bin/autograder && chmod +x /tmp/bin/autograder
start=$(date +%s)
PATH=/tmp/bin:$PATH CUDA_VISIBLE_DEVICES= AUTOGRADER_ROOT=$root bash "$root/source/run_autograder" | tail -5
echo "run_autograder: $(($(date +%s) - start)) s"
"$PY" - "$root/results/results.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
full = sum(t["max_score"] for t in r["tests"])
print(f"results.json: {r['score']:g} / {full:g}")
for t in r["tests"]:
    if t["score"] != t["max_score"] or "GPU service" in t.get("output", ""):
        print(f"  {t['name']}: {t['score']:g}/{t['max_score']:g} {t.get('output', '')[-160:]!r}")
PYEOF
kill $server; wait $server
grep -c "^job " "$OUT/serve.log"; grep "^job " "$OUT/serve.log" | tail -12
