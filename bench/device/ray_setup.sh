# Sourced by the device scripts that run Ray there (batch_gpu.sh, gpu_service.sh), from the
# repository root: installs Ray into $SITE once per warm machine, then sources setup.sh (the
# wheels of `.whl`, PyCUDA, PYTHONPATH, section()).
# Ray's wheel (80 MB) is larger than what one device call may carry (64 MiB), so it travels in
# two halves (`split -n 2` of the wheel) over two calls of the same warm machine: the first
# call carries `.rayparts/a` and copies it out of the tree (`cp -r .rayparts/a /tmp/rayparts-a`:
# a carried folder is gone from the tree at the next call); the next, within the machine's idle
# window, carries `.rayparts/b` and `.whl` (setup.sh's wheels plus Ray's jsonschema and the
# serve extra's FastAPI, uvicorn and limits, which the image lacks) and runs the script.
# bench/results/batch-gpu.md lists the wheels; they are fetched by hand and never committed.
SITE=/tmp/site
if [ ! -e "$SITE/.ray-installed" ]; then
    mkdir -p "$SITE"
    cat /tmp/rayparts-a/part-* .rayparts/b/part-* >/tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
    /opt/torch/.venv/bin/python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$SITE" /tmp/ray-*.whl || exit 1
    touch "$SITE/.ray-installed"
fi
export RAY_USAGE_STATS_ENABLED=0
source bench/device/setup.sh
