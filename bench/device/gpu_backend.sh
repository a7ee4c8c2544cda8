#!/usr/bin/env bash
# Proves the gpu backend on the device (run there from the repository root, with `.whl` carried):
# installs the carried wheels, builds PyCUDA from its sdist when no PyCUDA wheel was carried
# (the built wheel goes to $OUT: keep it in .whl/), runs tests/gpu and bench/device/gpu_demo.py,
# and with the argument `selfcheck` also `python -m autograder selfcheck --backend gpu`.
set -uo pipefail
PY=/opt/torch/.venv/bin/python3
OUT=${OUT:-/tmp/gpu-backend-out}
SITE=/tmp/site
mkdir -p "$OUT" "$SITE"
export PYTHONPATH="$PWD:$PWD/tests/gpu:$SITE" PYTHONUNBUFFERED=1

section() { printf '\n=== %s (%s) ===\n' "$1" "$(date -u +%T)"; }

section install
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || exit 1
if ! "$PY" -c "import pycuda.driver" 2>/dev/null; then
    section "build PyCUDA"
    rm -rf /tmp/pycuda-build && mkdir -p /tmp/pycuda-build
    tar xzf .whl/pycuda-*.tar.gz -C /tmp/pycuda-build
    (cd /tmp/pycuda-build/pycuda-* && CUDA_ROOT=/usr/local/cuda \
        "$PY" -m pip wheel --no-build-isolation --no-deps -w "$OUT" .) >"$OUT/pycuda-build.log" 2>&1 \
        || { tail -40 "$OUT/pycuda-build.log"; exit 1; }
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$OUT"/pycuda-*.whl || exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader

section "tests/gpu + canary unit tests"
"$PY" -m pytest -p no:cacheprovider -v tests/gpu/test_gpu_backend.py tests/gpu/test_gpu_worker.py tests/unit/test_gpu_canaries.py 2>&1 | tee "$OUT/pytest-gpu.log" | tail -30

section demo
"$PY" bench/device/gpu_demo.py 2>&1 | tee "$OUT/demo.log" | grep -a -E '^\|' | head -60

if [ "${1:-}" = selfcheck ]; then
    section selfcheck
    timeout "${SELFCHECK_S:-170}" "$PY" -m autograder selfcheck --backend gpu 2>&1 | tee "$OUT/selfcheck.log" | tail -40
    echo "selfcheck exit ${PIPESTATUS[0]}"
fi
section done
