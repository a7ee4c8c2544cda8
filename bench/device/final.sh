#!/usr/bin/env bash
# One device call that checks the whole product on the GPU (run there from the repository root
# with `.whl` carried, PyCUDA wheel included): GPU tests, the performance bench's planted
# submissions and 5-grading stability run (bench/perf_bench.py part c), then `selfcheck --backend gpu`
# over the whole course. Each step has its own time limit; logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/final-out}
source bench/device/setup.sh

section "tests/gpu"
timeout "${TESTS_S:-75}" "$PY" -m pytest -p no:cacheprovider -q tests/gpu 2>&1 | tee "$OUT/pytest-gpu.log" | tail -15

section "perf bench: planted submissions and stability"
timeout "${BENCH_S:-230}" "$PY" bench/perf_bench.py --parts c --budget "${BENCH_BUDGET_S:-170}" --out "$OUT" \
    --work /tmp/pbw 2>&1 | tee "$OUT/bench.log" | tail -25

section "selfcheck --backend gpu"
timeout "${SELFCHECK_S:-260}" "$PY" -m autograder selfcheck --backend gpu 2>&1 | tee "$OUT/selfcheck.log" | grep -E '^(ok|FAIL|fail)|exit' | tail -25
echo "selfcheck exit ${PIPESTATUS[0]}"
section done
