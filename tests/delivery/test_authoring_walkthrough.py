"""docs/authoring.md followed as written on a copy of the course: the guide and the grader cannot drift.

The guide's fenced blocks are read from the page in order. In a ``console`` block, each
``$ autograder ...`` line runs as ``python3 -m autograder ...`` in the copy and must exit 0;
the lines under a command are output it must print (runs of spaces collapsed). A ``diff``
block is applied to the file its ``+++`` line names, and each of its hunks must match that
file exactly once. Other blocks (``cuda``, ``yaml``) are illustrations, and rewriting the
handout is prose, so neither is applied. The walkthrough scaffolds ``relu``, self-checks it on
the emulator, edits its spec and reference, regenerates the starter and the handout's profile
block, self-checks again, runs every command of ``autograder --help`` that has a ``--check`` on
the whole course (the guide must run each after its last edit, as a course's CI does: a course
the guide leaves stale fails there) and builds its Gradescope zip: about 35 s of CPU on the 2-core
development machine.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click

from autograder.cli import main

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs/authoring.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def guide_blocks() -> list[tuple[str, str]]:
    """Every fenced block of the guide: (language, text), in order."""
    return [(found[1], found[2]) for found in FENCE.finditer(GUIDE.read_text(encoding="utf-8"))]


def console_steps(block: str) -> list[tuple[str, list[str]]]:
    """A console block's commands, each with the output lines shown under it."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.strip():
            steps[-1][1].append(line)
    return steps


def check_commands() -> list[str]:
    """Every ``autograder`` command that has a ``--check`` flag, as ``autograder --help`` lists them."""
    context = click.Context(main)
    commands = {name: main.get_command(context, name) for name in main.list_commands(context)}
    return sorted(
        f"autograder {name} --check"
        for name, command in commands.items()
        if command and any("--check" in param.opts for param in command.params)
    )


def squeezed(text: str) -> str:
    return " ".join(text.split())


def run_step(command: str, expected: list[str], course: Path) -> None:
    words = shlex.split(command)
    assert words[0] == "autograder", f"the guide runs {command!r}, not an autograder command"
    env = {key: value for key, value in os.environ.items() if key != "AUTOGRADER_COURSE"}
    env["PYTHONPATH"] = str(ROOT)  # the checkout's grader, whatever is installed
    done = subprocess.run(
        [sys.executable, "-m", "autograder", *words[1:]],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"$ {command}\n{done.stdout}{done.stderr}"
    for line in expected:
        assert squeezed(line) in squeezed(done.stdout), f"$ {command} did not print {line!r}:\n{done.stdout}"


def apply_diff(block: str, course: Path) -> None:
    """Apply a guide's diff: ``---``/``+++`` name the file, ``@@`` lines separate hunks."""
    lines = block.splitlines()
    target = next(line for line in lines if line.startswith("+++ "))
    path = course / target.removeprefix("+++ ").strip()
    text = path.read_text(encoding="utf-8")
    body = [line for line in lines if not line.startswith(("--- ", "+++ "))]
    for hunk in "\n".join(body).split("@@")[1:]:
        changed = [line or " " for line in hunk.strip("\n").splitlines()]
        old = "".join(line[1:] + "\n" for line in changed if line[0] in " -")
        new = "".join(line[1:] + "\n" for line in changed if line[0] in " +")
        assert text.count(old) == 1, f"{path.name}: the guide's hunk does not match once:\n{old}"
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


def test_the_authoring_guide_works_as_written(tmp_path):
    course = tmp_path / "course"
    for folder in ("assignments", "reference", "starter"):
        shutil.copytree(ROOT / folder, course / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "rubric.yaml", course / "rubric.yaml")
    done = []  # what was done, in order: the commands run and "diff" for each diff applied
    for language, block in guide_blocks():
        if language == "console":
            for command, expected in console_steps(block):
                run_step(command, expected, course)
                done.append(command)
        elif language == "diff":
            apply_diff(block, course)
            done.append("diff")
    assert done[0] == "autograder new relu" and done.count("diff") == 2, done
    last_diff = len(done) - 1 - done[::-1].index("diff")
    selfcheck = "autograder selfcheck --assignment relu --backend emulator"
    assert selfcheck in done[last_diff:], f"the guide no longer self-checks the edited assignment: {done}"
    assert "fmaxf" in (course / "reference/relu.cu").read_text()
    assert "fmaxf" not in (course / "starter/relu.cu").read_text()
    checks = check_commands()
    assert {"autograder starters --check", "autograder handout-profiles --check"} <= set(checks)
    missing = [command for command in checks if command not in done[last_diff:]]
    assert not missing, f"the guide's last steps do not run every --check, as a course's CI does: {missing}"
