#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image from the
# autograder.zip that `autograder gradescope` writes (docs/gradescope.md); the zip is unpacked
# in /autograder/source, beside this file. It installs the grader from that copy (not
# editable), with the versions pyproject.toml pins, into the python3 on PATH; then it proves
# that the image grades: the pinned NVRTC loads, the `autograder` command is on PATH, and
# every assignment's reference scores full marks and its starter 0 on the emulator. Any
# failure stops the build with its message: a broken image must never grade a student.
# PYTHON names another interpreter (default: python3).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}

if ! "$python" -m pip --version > /dev/null 2>&1; then
  # Gradescope's Ubuntu 22.04 image has Python 3.10; pip may be missing.
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-pip
fi

# --ignore-installed: a distribution's own copy of a dependency (Ubuntu's python3-yaml, which
# pip cannot uninstall) is shadowed by the pinned one, never an error or a silent mismatch.
PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off \
  "$python" -m pip install --no-cache-dir --ignore-installed "$here"

cd /  # import the installed package, not the copy in /autograder/source
"$python" -c '
import sys
from autograder.backends.compiler import nvrtc_problem
problem = nvrtc_problem()
sys.exit(f"setup.sh: {problem}" if problem else 0)
'
if ! command -v autograder > /dev/null; then
  echo "setup.sh: pip installed the autograder command outside PATH ($PATH)" >&2
  exit 1
fi
autograder selfcheck --course "$here" --backend emulator
echo "setup.sh: the autograder is installed and grades this course"
