#!/usr/bin/env bash
# Proves the gpu backend on the device (run there from the repository root, with `.whl` carried):
# installs the carried wheels, builds PyCUDA from its sdist when no PyCUDA wheel was carried
# (the built wheel goes to $OUT: keep it in .whl/), runs tests/gpu and bench/device/gpu_demo.py,
# and with the argument `selfcheck` also `python -m autograder selfcheck --backend gpu`.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-backend-out}
source bench/device/setup.sh

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
