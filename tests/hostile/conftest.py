"""Hostile submissions, graded as Gradescope would: the command, a fixed seed, the emulator.

``graded(tmp_path, {"vector_add.cu": SOURCE})`` runs ``autograder grade`` in a subprocess on
a submission folder holding those files and returns the parsed ``results.json`` with the
sizes of what was written. Every test then holds the grader to the same rules
(:func:`assert_sound`): a valid ``results.json`` under 1 MB, report files under 10 MB, no
traceback and no path of the grading machine in anything a student sees.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS_LIMIT = 1 << 20
GRADER_LIMIT_MB = 500
# `autograder ...`, reporting the grader process's own peak memory as it exits
MEASURED_GRADER = (
    "import atexit, re, sys\n"  # VmHWM, not ru_maxrss: a child starts with its parent's ru_maxrss
    "peak = lambda: re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
    "atexit.register(lambda: print(f'grader peak rss: {peak()} kB', file=sys.stderr))\n"
    "from autograder.cli import main\n"
    "main(sys.argv[1:])\n"
)
REPORT_LIMIT = 10 << 20
# what a student must never read: a Python traceback, or a path of the grading machine
LEAKS = re.compile(
    r"Traceback \(most recent call last\)|File \"/|/(?:tmp|root|home|usr|opt|work|autograder)/"
)


@dataclass
class Graded:
    results: dict
    results_bytes: int
    report_bytes: dict[str, int]
    exit_code: int
    stderr: str
    grader_peak_mb: float  # the grader process's own peak resident memory (not its workers')

    def item(self, suffix: str) -> dict:
        """The test whose name ends with ``suffix`` (e.g. ``"bounds (safety)"``)."""
        return next(t for t in self.results["tests"] if t["name"].endswith(suffix))

    def score(self, suffix: str) -> float:
        return self.item(suffix)["score"]


def grade_folder(folder: Path, out: Path, *args: str, timeout: float = 600) -> Graded:
    results, report = out / "results.json", out / "report"
    command = [
        sys.executable,
        "-c",
        MEASURED_GRADER,
        "grade",
        str(folder),
        "--course",
        str(ROOT),
        "--backend",
        "emulator",
        "--seed",
        "7",
        "--results",
        str(results),
        "--report",
        str(report),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=out)
    reports = {path.name: path.stat().st_size for path in out.glob("report.*")}
    text = results.read_text() if results.exists() else "{}"
    peak = re.search(r"grader peak rss: (\d+) kB", done.stderr)
    return Graded(
        json.loads(text),
        len(text.encode()),
        reports,
        done.returncode,
        done.stderr,
        int(peak.group(1)) / 1024 if peak else float("nan"),
    )


@pytest.fixture
def graded(tmp_path):
    """``graded(files, *args)``: a submission folder of ``files`` (name -> text or bytes), graded."""

    def grade(files: dict[str, str | bytes], *args: str, timeout: float = 600) -> Graded:
        folder = tmp_path / "submission"
        folder.mkdir(exist_ok=True)
        for name, content in files.items():
            path = folder / name
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        return grade_folder(folder, out, *args, timeout=timeout)

    return grade


def assert_sound(graded: Graded, regrade: bool = False) -> None:
    """The rules every graded submission keeps, however hostile."""
    assert graded.results.get("tests"), (
        f"no tests in results.json (exit {graded.exit_code}): {graded.stderr[-2000:]}"
    )
    assert graded.results_bytes < RESULTS_LIMIT, f"results.json is {graded.results_bytes} bytes"
    assert all(size < REPORT_LIMIT for size in graded.report_bytes.values()), graded.report_bytes
    assert graded.grader_peak_mb < GRADER_LIMIT_MB, f"the grader peaked at {graded.grader_peak_mb:.0f} MB"
    student_text = json.dumps(
        [graded.results.get("output", "")] + [t["output"] for t in graded.results["tests"]]
    )
    leak = LEAKS.search(student_text)
    if leak:
        context = student_text[max(0, leak.start() - 200) : leak.end() + 200]
        raise AssertionError(f"a student would read {leak.group(0)!r}: {context}")
    if not regrade:  # a timed performance item is "not run" on the emulator, for a GPU regrade
        tests = graded.results["tests"]
        tagged = [t["name"] for t in tests if "regrade" in t["tags"] and "performance" not in t["tags"]]
        assert not tagged, f"flagged for regrading, as if the grader had failed: {tagged}"


def reference(name: str) -> str:
    return (ROOT / "reference" / f"{name}.cu").read_text()
