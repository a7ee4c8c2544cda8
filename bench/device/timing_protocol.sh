#!/usr/bin/env bash
# The timing protocol that reads each input set where it was uploaded (2026-12-03) against the
# commit before it, on the device, from the repository root with `.whl` carried (setup.sh) and,
# for the comparison, `out/base.tar` (`git archive BASE -o out/base.tar`, carried, never
# committed): bench/timing_spread.py of both trees (GPU seconds per session, spread of the
# self-ratios), the GPU timing tests, then, with `gradings` given, three timed-only gradings of
# the references (bench/gradings_spread.py). Results: bench/results/timing-spread.md.
set -uo pipefail
OUT=${OUT:-/tmp/timing-protocol-out}
source bench/device/setup.sh
SESSIONS=${SESSIONS:-3}
if [ -f out/base.tar ]; then
    rm -rf /tmp/base && mkdir -p /tmp/base && tar xf out/base.tar -C /tmp/base
    section "timing spread, the base tree"
    (cd /tmp/base && "$PY" -c "import autograder; print('imports', autograder.__file__)" \
        && timeout 240 "$PY" bench/timing_spread.py --sessions "$SESSIONS" --out "$OUT/spread-base.json") 2>&1 \
        | tee "$OUT/spread-base.log"
fi
section "timing spread, this tree"
timeout 240 "$PY" bench/timing_spread.py --sessions "$SESSIONS" --out "$OUT/spread-tree.json" 2>&1 | tee "$OUT/spread-tree.log"
section "tests/gpu/test_timing.py"
timeout 200 "$PY" -m pytest -p no:cacheprovider -o addopts="" -q tests/gpu/test_timing.py 2>&1 | tail -5
if [[ " $* " == *" gradings "* ]]; then
    section "three timed-only gradings of the references"
    timeout 420 "$PY" bench/gradings_spread.py --runs 3 --keep "$OUT/gradings" 2>&1 | tee "$OUT/gradings.log"
fi
section done
