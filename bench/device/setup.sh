# Sourced by the device scripts (run there from the repository root): the project installed as
# users install it, into a real venv (docs/gpu-facts.md), PyCUDA built from its sdist when no
# PyCUDA wheel was carried (the built wheel goes to $OUT: keep it in .whl/), and section().
#
# The venv (/tmp/venv, made once per warm machine) sees the image's own packages (numpy, CuPy,
# torch) after its own, through a .pth line; `pip install --no-index` then puts the pinned
# NVRTC, cuda-bindings and the CUDA headers' wheels in the venv itself, where cuda-pathfinder
# looks first (site.getsitepackages()), so the pinned NVRTC is the one loaded. Installing with
# `pip --target` + PYTHONPATH instead loads the image's NVRTC 13.0: pathfinder never searches
# PYTHONPATH (measured, 2026-12-02).
#
# The wheels are fetched by hand (`pip download` of pyproject's pins for cp312 manylinux) and
# never committed. NVRTC's wheel (58 MB) and the rest (19 MB) are more than one device call
# may carry (64 MiB), so they travel over two calls of one warm machine: the first carries
# `.whl-nvrtc` and copies it out of the tree (`cp -r .whl-nvrtc /tmp/wheels-nvrtc`: a carried
# folder is gone from the tree at the next call); the next carries `.whl` and runs the script.
# `.whl` is kept in /tmp/wheels (WHEELS) for the later calls of the same warm machine, which
# need not carry it again (ray_setup.sh's, whose Ray wheel leaves no room for it).
#
# The device runs a copy of the working tree as it is, uncommitted changes included: a figure
# for a commit needs a tree without any (2026-12-03: a batch run carried an unfinished emulator
# change and measured that instead, bench/results/batch-gpu.md).
BASE=/opt/torch/.venv/bin/python3
VENV=/tmp/venv
PY=$VENV/bin/python3
mkdir -p "$OUT"
export PYTHONPATH="$PWD/tests/gpu" PYTHONUNBUFFERED=1
section() { printf '\n=== %s (%s) ===\n' "$1" "$(date -u +%T)"; }

section install
[ -d /tmp/wheels-nvrtc ] || { echo "no /tmp/wheels-nvrtc: carry .whl-nvrtc and copy it there first"; exit 1; }
WHEELS=/tmp/wheels
if [ -d .whl ]; then mkdir -p "$WHEELS" && cp -r .whl/. "$WHEELS/"; fi
[ -d "$WHEELS" ] || { echo "no wheels: carry .whl"; exit 1; }
if [ ! -x "$PY" ]; then
    "$BASE" -m venv "$VENV" || exit 1
    "$BASE" -c 'import site; print(site.getsitepackages()[0])' \
        >"$("$PY" -c 'import site; print(site.getsitepackages()[0])')/image-packages.pth"
fi
if ! ls "$WHEELS"/pycuda-*.whl >/dev/null 2>&1 && ! "$PY" -c "import pycuda" 2>/dev/null; then
    section "build PyCUDA"
    rm -rf /tmp/pycuda-build && mkdir -p /tmp/pycuda-build
    tar xzf "$WHEELS"/pycuda-*.tar.gz -C /tmp/pycuda-build
    (cd /tmp/pycuda-build/pycuda-* && CUDA_ROOT=/usr/local/cuda \
        "$PY" -m pip wheel --no-build-isolation --no-deps -w "$OUT" .) >"$OUT/pycuda-build.log" 2>&1 \
        || { tail -40 "$OUT/pycuda-build.log"; exit 1; }
    cp "$OUT"/pycuda-*.whl "$WHEELS"/
fi
"$PY" -m pip install -q --no-index --find-links "$WHEELS" --find-links /tmp/wheels-nvrtc -e '.[gpu]' || exit 1
"$PY" -c "from autograder.backends import compiler; print('NVRTC', compiler.nvrtc_version(), compiler.nvrtc_problem() or 'pinned')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
