# Sourced by the device scripts (run there from the repository root, `.whl` carried): the
# carried wheels into $SITE, PyCUDA built from its sdist when no PyCUDA wheel was carried (the
# built wheel goes to $OUT: keep it in .whl/), the project on PYTHONPATH, and section().
PY=/opt/torch/.venv/bin/python3
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
    "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" "$OUT"/pycuda-*.whl || exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
