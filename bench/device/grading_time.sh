#!/usr/bin/env bash
# Where grading one assignment's reference on the GPU spends its time (bench/gpu_grading_time.py),
# then optionally the GPU tests and selfcheck. Run on the device from the repository root with
# `.whl` carried, after a call that carried `.whl-nvrtc` (setup.sh): the pinned NVRTC compiles.
# Usage: [TIMED_ONLY=1] [HOST=] bash bench/device/grading_time.sh LABEL [ASSIGNMENTS] [cli] [tests] [selfcheck]
# (TIMED_ONLY=1: the timed items alone, as a batch GPU task grades them; HOST= leaves out --host)
set -uo pipefail
OUT=${OUT:-/tmp/grading-time-out}
LABEL=${1:-run}
ASSIGNMENTS=${2:-}
source bench/device/setup.sh
"$PY" -c "from autograder.backends import compiler; print('NVRTC', compiler.nvrtc_version(), compiler.nvrtc_problem() or 'pinned')"
nproc; grep MemTotal /proc/meminfo

section "grading time ($LABEL)"
"$PY" bench/gpu_grading_time.py --label "$LABEL" --out "$OUT" ${HOST-"--host"} ${TIMED_ONLY:+--timed-only} \
    ${ASSIGNMENTS:+--assignments "$ASSIGNMENTS"}

if [[ " $* " == *" cli "* ]]; then
    section "the plain command, no profiling"
    for name in vector_add transpose gemm_tiled; do
        start=$(date +%s.%N)
        "$PY" -m autograder grade reference --assignment "$name" --backend gpu --seed 1 \
            --results "/tmp/cli-$name.json" --report "/tmp/cli-$name" | tail -1
        echo "$name: $("$PY" -c "print(round($(date +%s.%N) - $start, 2))") s"
    done
fi
if [[ " $* " == *" tests "* ]]; then
    section "tests/gpu"
    timeout "${TESTS_S:-240}" "$PY" -m pytest -p no:cacheprovider -q -rs tests/gpu 2>&1 | tee "$OUT/pytest-gpu.log" | tail -15
fi
if [[ " $* " == *" selfcheck "* ]]; then
    section "selfcheck --backend gpu"
    start=$(date +%s)
    only=(); for name in ${SELFCHECK_ASSIGNMENTS:-}; do only+=(--assignment "$name"); done
    timeout "${SELFCHECK_S:-300}" "$PY" -m autograder selfcheck --backend gpu "${only[@]}" 2>&1 | tee "$OUT/selfcheck.log" \
        | grep -E '^(ok|FAIL)|not run' | tail -25
    echo "selfcheck exit ${PIPESTATUS[0]} in $(($(date +%s) - start)) s"
fi
section done
