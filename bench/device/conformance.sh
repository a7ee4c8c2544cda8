#!/usr/bin/env bash
# The H200's answers for the conformance suite (tests/conformance/record.py): run on the device
# from the repository root with the built cases carried, e.g.
#   here:   python3 -m tests.conformance.record build .conformance
#   device: bash bench/device/conformance.sh .conformance      (carry: .conformance)
#   here:   python3 -m tests.conformance.record adopt <the files that came back>
# Needs numpy and cupy (the device image's /opt/torch/.venv has both); no PyCUDA, no NVRTC.
set -euo pipefail
PY=${PY:-/opt/torch/.venv/bin/python3}
OUT=${OUT:-/tmp/conformance-out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 "$PY" -m tests.conformance.record run "${1:-.conformance}" "$OUT"
