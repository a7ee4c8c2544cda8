#!/usr/bin/env bash
# The backend contract on the GPU (run there from the repository root with `.whl` carried):
# installs the carried wheels (building PyCUDA from its sdist when no wheel was carried; the
# built wheel goes to $OUT: keep it in .whl/), then
#   part 1: tests/gpu, and `grade --sanitize` of a planted missing guard, whose bounds item must
#           carry compute-sanitizer's finding (its worker runs under compute-sanitizer);
#   part 2: `selfcheck --backend gpu` over the whole course.
# Carry the pinned NVRTC wheel in .whl/ too (pyproject.toml's version), so that the GPU compiles
# with the course's compiler. Usage: bash bench/device/contract.sh 1|2|all.  Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/contract-out}
PART=${1:-all}
source bench/device/setup.sh

section "the compiler"
"$PY" -c "from autograder.backends import compiler; print('NVRTC', compiler.nvrtc_version(), compiler.nvrtc_problem() or 'pinned')"
timeout 120 "$PY" -m pytest -p no:cacheprovider -q tests/hostile/test_reproducibility.py 2>&1 | tail -3

if [ "$PART" = 1 ] || [ "$PART" = all ]; then
    section "tests/gpu"
    timeout "${TESTS_S:-200}" "$PY" -m pytest -p no:cacheprovider -q -rs tests/gpu 2>&1 | tee "$OUT/pytest-gpu.log" | tail -15

    section "grade --sanitize: vector_add without its guard"
    mkdir -p /tmp/unguarded
    sed 's/if (i < n) c\[i\]/c[i]/' reference/vector_add.cu > /tmp/unguarded/vector_add.cu
    grep -q 'if (i < n) c\[i\]' /tmp/unguarded/vector_add.cu && echo "the planted bug did not apply"
    timeout "${SANITIZE_S:-150}" "$PY" -m autograder grade /tmp/unguarded --assignment vector_add --backend gpu \
        --sanitize --seed 7 --results "$OUT/sanitize-results.json" --report "$OUT/sanitize-report" 2>&1 | tail -3
    "$PY" - "$OUT/sanitize-results.json" <<'PYEND'
import json, sys
for test in json.load(open(sys.argv[1]))["tests"]:
    if test["name"].endswith(("bounds (safety)", "barriers (safety)")):
        print(f"--- {test['name']}: {test['score']} / {test['max_score']}\n{test['output']}")
PYEND
fi

if [ "$PART" = 2 ] || [ "$PART" = all ]; then
    section "selfcheck --backend gpu"
    timeout "${SELFCHECK_S:-540}" "$PY" -m autograder selfcheck --backend gpu 2>&1 \
        | while IFS= read -r line; do echo "$(date -u +%T) $line"; done | tee "$OUT/selfcheck.log" \
        | grep -E '^[0-9:]+ (ok|FAIL)|not run' | tail -25
    echo "selfcheck exit ${PIPESTATUS[0]} ($(date -u +%T))"
fi
section done
