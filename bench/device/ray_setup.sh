# Sourced by the device scripts that run Ray there (batch_gpu.sh, gpu_service.sh), from the
# repository root: sources setup.sh (the project in its venv, PyCUDA, section()), then installs
# Ray into that venv once per warm machine.
# Ray's wheel (80 MB) is larger than what one device call may carry (64 MiB), so it travels in
# two halves (`split -n 2` of the wheel) over calls of the same warm machine: an earlier call
# carries `.rayparts/a` and copies it out of the tree (`cp -r .rayparts/a /tmp/rayparts-a`:
# a carried folder is gone from the tree at the next call), as the NVRTC wheel is (setup.sh);
# the last carries `.rayparts/b` (and `.whl`, unless an earlier call of this warm machine did:
# setup.sh keeps it in /tmp/wheels) (setup.sh's wheels plus Ray's jsonschema and the
# serve extra's FastAPI, uvicorn and limits, which the image lacks) and runs the script.
# bench/results/batch-gpu.md lists the wheels; they are fetched by hand and never committed.
source bench/device/setup.sh
if ! "$PY" -c "import ray" 2>/dev/null; then
    cat /tmp/rayparts-a/part-* .rayparts/b/part-* >/tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir /tmp/ray-*.whl || exit 1
    "$PY" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl || exit 1  # jsonschema, FastAPI, ...
fi
export RAY_USAGE_STATS_ENABLED=0
