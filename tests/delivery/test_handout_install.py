"""The handout's README followed as a student follows it: its set-up lines, then its first command.

A stock Debian or Ubuntu Python refuses ``pip install`` outside a virtual environment
(PEP 668, ``error: externally-managed-environment``), so the README's set-up makes one. The test
builds a handout of the course's first assignment, reads the lines of the README's "Set up,
once" block and runs them, exactly as written, in one shell in the handout; then the first
command of "Check a kernel". pip runs with ``PIP_REQUIRE_VIRTUALENV``, so set-up lines that
install anywhere but a virtual environment fail here as they fail on Debian (and never touch
this machine's Python). One change: the venv is made with ``--system-site-packages
--without-pip``, so the grader's dependencies installed here (NVRTC's wheels, numpy) are reused
instead of downloaded, and so is pip (the venv's own copy of the same pip takes 10 to 20 s to
install on 2 cores); pip still builds the grader from the handout (fetching setuptools for the
build, as a student's does) and installs it into ``.venv``, and ``autograder`` must be
``.venv``'s. About 30 s on the 2-core development machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from autograder.course.folder import read_course

ROOT = Path(__file__).resolve().parents[2]
FIRST = next(iter(read_course(ROOT).rubric.assignments))
MAKE_VENV = "python3 -m venv .venv"


def console_block(readme: str, heading: str) -> list[str]:
    """The command lines of the first ``console`` block under ``heading``."""
    section = readme.split(f"## {heading}\n", 1)[1]
    block = re.search(r"^```console\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert block, f"the README's {heading!r} section has no console block"
    return [line for line in block[1].splitlines() if line.strip() and not line.startswith("#")]


def student_env() -> dict[str, str]:
    """This machine's environment, with the test's Python as ``python3`` and pip refusing to
    install outside a virtual environment, as a PEP 668 Python does."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "AUTOGRADER_COURSE", "VIRTUAL_ENV"}}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PIP_REQUIRE_VIRTUALENV"] = "1"
    return env


def test_the_readmes_set_up_and_first_command_work_as_written(tmp_path):
    handout = tmp_path / "handout"
    command = [
        sys.executable,
        "-m",
        "autograder",
        "handout",
        FIRST,
        "--course",
        str(ROOT),
        "--out",
        str(handout),
    ]
    built = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    readme = (handout / "README.md").read_text(encoding="utf-8")
    set_up = console_block(readme, "Set up, once")
    assert set_up.count(MAKE_VENV) == 1, f"the set-up does not make a virtual environment: {set_up}"
    set_up = [
        f"{MAKE_VENV} --system-site-packages --without-pip" if line == MAKE_VENV else line for line in set_up
    ]
    first = console_block(readme, "Check a kernel before you submit it")[0]
    assert first == f"autograder check starter/{FIRST}.cu"
    script = "\n".join(["set -e", *set_up, "command -v autograder", "set +e", first, 'echo "exit status $?"'])
    done = subprocess.run(
        ["bash", "-c", script], cwd=handout, env=student_env(), capture_output=True, text=True, timeout=300
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert f"{handout}/.venv/bin/autograder\n" in done.stdout, shown  # the grader that pip put in .venv
    assert "exit status 1" in done.stdout and f"{FIRST} correctness (aligned)" in done.stdout, shown
    assert "Traceback" not in shown
