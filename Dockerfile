# The grading image, in Gradescope's layout: the course in /autograder/source, the student's
# files in /autograder/submission, results in /autograder/results/results.json, and the
# executable /autograder/run_autograder.
#
# Default: an NVIDIA CUDA devel image with PyCUDA (run with `docker run --gpus all`).
# Hosted Gradescope has no GPU: build with
#   --build-arg BASE=gradescope/autograder-base:ubuntu-22.04 --build-arg EXTRAS=
# and the grader uses the PTX emulator (`--backend auto` finds no GPU).
ARG BASE=nvidia/cuda:12.8.1-devel-ubuntu24.04
FROM ${BASE}

# Extras of the package to install on top of the base install: "gpu" (PyCUDA) or nothing.
ARG EXTRAS=gpu
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    CUDA_ROOT=/usr/local/cuda \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv "$VIRTUAL_ENV"

COPY . /autograder/source
WORKDIR /autograder/source

# The same install command as README.md and .ci/run, then the GPU extra where asked for.
RUN python3 -m pip install -e . \
    && if [ -n "$EXTRAS" ]; then python3 -m pip install -e ".[$EXTRAS]"; fi

# The package's bytecode, compiled once here: an editable install leaves none, so every container
# (one grading) would compile each module it imports, in the grader and again in its emulator
# worker (about 0.5 s of CPU a grading on a 2-core VM: bench/results/grading-speed.md).
RUN python3 -m compileall -q /autograder/source/autograder

RUN install -m 755 run_autograder /autograder/run_autograder \
    && mkdir -p /autograder/submission /autograder/results

# Prove that the image grades (every reference full marks, every starter 0, on the emulator:
# a failure stops the build), as Gradescope's setup.sh does. Its gradings also fill the compile
# cache (/root/.cache/cuda-autograder: the references' compiles and their counts on the listed
# cases), which every container starts from, so a grading compiles and runs only the student's
# kernels and the drawn cases (docs/gradescope.md: 14.1 s -> 5.7-6.0 s for a whole course, its
# compiles ahead on a second core).
RUN autograder selfcheck --course /autograder/source --backend emulator

CMD ["/autograder/run_autograder"]
