"""``--sanitize``: a case group's launches on the GPU under ``compute-sanitizer``, as evidence.

The emulator is the grader's own oracle for bounds, barriers and races; NVIDIA's
``compute-sanitizer`` is a second one on real hardware. Each tool (memcheck, racecheck,
initcheck) watches a GPU worker (``backends.watched_gpu``: the same killable worker as every
GPU run, started under the tool) while it runs the launches grading ran, within a time
limit; the tool's report (``sanitizer_report.py``) becomes a :class:`SanitizerRun`. The
pipeline adds the runs to the bounds and barriers items, unscored (:func:`with_cross_check`):
their findings of the item's check, as ``SanitizerRecord`` evidence.

What the sanitizer cannot see (measured on an H200, ``docs/gpu-facts.md``): an early
``return`` before ``__syncthreads()`` and a barrier inside ``if (i < n)`` pass every tool,
because the hardware releases a barrier when threads exit; only the emulator names those.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.backends.registry import watched_gpu
from autograder.contract import Backend, BackendError, Finding, Launch, LaunchTimeout
from autograder.feedback import counted
from autograder.grading.checks import finding_lines
from autograder.grading.compare import MAX_RECORDED_FINDINGS
from autograder.grading.evidence import SanitizerRecord, recorded
from autograder.grading.grade import ItemResult
from autograder.grading.sanitizer_report import Allocation, allocations_of, error_count, parse

TOOLS = ("memcheck", "racecheck", "initcheck")
TOOL_OPTIONS = {
    "memcheck": ("--print-limit", "1000"),
    "racecheck": ("--racecheck-report", "hazard", "--print-limit", "1000"),
    "initcheck": ("--print-limit", "1000"),
}
CROSS_CHECKED = ("bounds", "barriers")  # the checks whose items carry the sanitizer's findings
TIME_LIMIT_S = 300.0  # per tool, over all the group's launches
LOG_LIMIT = 20_000


@dataclass(frozen=True)
class SanitizerRun:
    """One tool over a case group's launches: its findings, or why there are none."""

    tool: str
    findings: tuple[Finding, ...] = ()
    errors: int | None = None  # the tool's own count (its summary line)
    note: str | None = None  # not run, or not finished: why
    log: str = field(default="", repr=False)  # the tool's report, its first LOG_LIMIT characters


def sanitizer_path() -> str | None:
    """``compute-sanitizer`` on PATH or in the CUDA toolkit, if there is one."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_ROOT"), "/usr/local/cuda"):
        candidate = Path(root or "/nonexistent") / "bin" / "compute-sanitizer"
        if candidate.is_file():
            return str(candidate)
    return None


def cross_check(
    launches: Iterable[Launch], tools: Sequence[str] = TOOLS, time_limit_s: float = TIME_LIMIT_S
) -> list[SanitizerRun]:
    """Run ``launches`` (a case group, as grading ran it) under each tool in turn."""
    tool_path = sanitizer_path()
    if tool_path is None:
        return [SanitizerRun(tool, note="not run: compute-sanitizer was not found") for tool in tools]
    launches = list(launches)
    allocations = allocations_of(launches)
    return [_run_tool(tool_path, tool, launches, allocations, time_limit_s) for tool in tools]


def _run_tool(
    tool_path: str,
    tool: str,
    launches: list[Launch],
    allocations: Mapping[int, Allocation],
    time_limit_s: float,
) -> SanitizerRun:
    with tempfile.TemporaryDirectory(prefix="sanitize-") as scratch:
        watch = _Watch(tool_path, tool, Path(scratch))
        try:
            note = _launch_watched(watch, launches, time_limit_s)
        except Exception as e:  # the tool or its worker failed: the cross-check says so, grading goes on
            note = f"the sanitizer's run failed: {type(e).__name__}: {e}"
        finally:
            watch.close()
        text = "".join(log.read_text(errors="replace") for log in watch.logs if log.exists())
    findings = tuple(parse(text, tool, allocations))
    return SanitizerRun(tool, findings, error_count(text), note, text[:LOG_LIMIT])


class _Watch:
    """A GPU worker under the tool, a fresh one (with its own log) after a kernel crashed the last."""

    def __init__(self, tool_path: str, tool: str, scratch: Path):
        self.options = (tool_path, "--tool", tool, *TOOL_OPTIONS[tool])
        self.tool = tool
        self.scratch = scratch
        self.logs: list[Path] = []
        self.backend: Backend | None = None  # the worker under the tool, started by a launch

    def launch(self, launch: Launch) -> None:
        if self.backend is None:
            self.logs.append(self.scratch / f"{self.tool}-{len(self.logs)}.log")
            self.backend = watched_gpu((*self.options, "--log-file", str(self.logs[-1])))
        try:
            self.backend.launch(launch)
        except BackendError:  # a crash ends the worker, and the tool's report with it
            self.close()
            raise

    def close(self) -> None:
        """Let the worker exit, so that the tool writes the end of its report."""
        if self.backend is not None:
            self.backend.close()
            self.backend = None


def _launch_watched(watch: _Watch, launches: list[Launch], time_limit_s: float) -> str | None:
    """Every launch under the tool; why it stopped early, if it did."""
    stopped = f"stopped after {time_limit_s:g} s (the kernel is slow or hangs under the sanitizer)"
    deadline = time.monotonic() + time_limit_s
    for launch in launches:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return stopped
        try:
            watch.launch(replace(launch, time_limit_s=remaining))
        except LaunchTimeout:
            return stopped
        except BackendError:  # a crash: the tool has reported it; run the others
            continue
    return None


def with_cross_check(result: ItemResult, runs: Sequence[SanitizerRun]) -> ItemResult:
    """``result`` with the runs' findings of its check added to its output and evidence, unscored."""
    check = result.item.check
    findings = [f for run in runs for f in run.findings if f.check == check]
    lines = [f"compute-sanitizer cross-check (not scored): {counted(len(findings), f'{check} finding')}"]
    lines += finding_lines(findings)
    lines += [f"  {run.tool}: {run.note}" for run in runs if run.note]
    evidence = replace(
        result.evidence,
        sanitizer=tuple(
            SanitizerRecord(
                run.tool,
                run.errors,
                run.note,
                tuple(recorded(f) for f in run.findings if f.check == check)[:MAX_RECORDED_FINDINGS],
            )
            for run in runs
        ),
    )
    return replace(result, output=result.output + "\n" + "\n".join(lines), evidence=evidence)
