"""``--sanitize``: each tool watches the same GPU worker as grading, and its findings join the items."""

import sys

import numpy as np

from autograder.backends.worker import WorkerBackend
from autograder.contract import Buffer, Launch, Program, Scalar
from autograder.course.rubric import Item
from autograder.grading import sanitize
from autograder.grading.grade import ItemResult
from autograder.grading.sanitizer_report import parse

from .fake_backend import FakeBackend
from .test_sanitizer_report import MEMCHECK, RACECHECK_HAZARD

ADD = "def vector_add(ctx, a, b, c, n):\n    c[:n] = a[:n] + b[:n]\n"
HANG = "import time\ndef vector_add(ctx, a, b, c, n):\n    time.sleep(60)\n"
CRASH = (
    "from autograder.contract import LaunchFailure\n"
    "def vector_add(ctx, a, b, c, n):\n"
    "    raise LaunchFailure('an illegal memory access was encountered')\n"
)


def _launch(n, source=ADD):
    return Launch(
        Program(source, "vector_add.cu", "vector_add"),
        grid=(-(-n // 256), 1, 1),
        block=(256, 1, 1),
        args=(
            Buffer("a", np.ones(n, np.float32)),
            Buffer("b", np.ones(n, np.float32)),
            Buffer("c", np.full(n, np.nan, np.float32), is_output=True),
            Scalar("n", n),
        ),
    )


def _fake_sanitizer(tmp_path, body):
    """A stand-in for compute-sanitizer: writes ``body`` to its --log-file, then runs what it watches."""
    script = tmp_path / "compute-sanitizer"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "at = sys.argv.index('--log-file')\n"
        f"open(sys.argv[at + 1], 'w').write({body!r})\n"
        "os.execv(sys.argv[at + 2], sys.argv[at + 2:])\n"
    )
    script.chmod(0o755)
    return str(script)


def _watched_fake(monkeypatch, tmp_path, body):
    """compute-sanitizer is the fake above; the watched worker runs the fake backend, not a GPU."""
    monkeypatch.setattr(sanitize, "sanitizer_path", lambda: _fake_sanitizer(tmp_path, body))
    watched = []

    def worker(command):
        watched.append(WorkerBackend(FakeBackend, "fake", command=command))
        return watched[-1]

    monkeypatch.setattr(sanitize, "watched_gpu", worker)
    return watched


def test_each_tool_watches_a_worker_running_the_launches_and_its_log_is_parsed(tmp_path, monkeypatch):
    watched = _watched_fake(monkeypatch, tmp_path, MEMCHECK)
    [run] = sanitize.cross_check([_launch(1000), _launch(10)], tools=("memcheck",), time_limit_s=30)
    assert run.tool == "memcheck" and run.errors == 3 and run.note is None
    assert {f.kind for f in run.findings} == {"out_of_bounds_write", "out_of_bounds_read"}
    [worker] = watched
    assert worker.command[0].endswith("compute-sanitizer") and worker.starts == 1 and worker._process is None


def test_after_a_crash_the_next_launch_runs_under_a_fresh_watch_with_its_own_report(tmp_path, monkeypatch):
    watched = _watched_fake(monkeypatch, tmp_path, MEMCHECK)
    [run] = sanitize.cross_check([_launch(1000, CRASH), _launch(10)], tools=("memcheck",), time_limit_s=30)
    assert len(watched) == 2 and all(worker._process is None for worker in watched)
    assert run.errors == 6 and run.note is None  # both reports, each with its 3 errors


def test_a_hanging_kernel_is_stopped_at_the_time_limit(tmp_path, monkeypatch):
    _watched_fake(monkeypatch, tmp_path, "")
    [run] = sanitize.cross_check([_launch(10, HANG)], tools=("racecheck",), time_limit_s=1)
    assert run.findings == () and run.note.startswith("stopped after 1 s")


def test_a_worker_that_cannot_start_is_a_note_not_a_lost_grade(tmp_path, monkeypatch):
    monkeypatch.setattr(sanitize, "sanitizer_path", lambda: _fake_sanitizer(tmp_path, ""))
    monkeypatch.setattr(sanitize, "watched_gpu", lambda command: WorkerBackend(_no_gpu, "x", command=command))
    [run] = sanitize.cross_check([_launch(10)], tools=("memcheck",), time_limit_s=30)
    assert run.note.startswith("the sanitizer's run failed: WorkerError") and "no GPU here" in run.note


def _no_gpu():
    raise RuntimeError("no GPU here")


def test_without_compute_sanitizer_every_tool_says_so(monkeypatch):
    monkeypatch.setattr(sanitize, "sanitizer_path", lambda: None)
    runs = sanitize.cross_check([_launch(10)])
    assert [r.tool for r in runs] == list(sanitize.TOOLS)
    assert all(r.note == "not run: compute-sanitizer was not found" for r in runs)


def test_the_cross_check_joins_an_item_unscored():
    runs = [
        sanitize.SanitizerRun("memcheck", tuple(parse(MEMCHECK, "memcheck")), 3),
        sanitize.SanitizerRun("racecheck", note="stopped after 300 s"),
    ]
    bounds = ItemResult(Item("vector_add", "bounds", "safety", 3.0, "bounds"), 3.0, "ok")
    checked = sanitize.with_cross_check(bounds, runs)
    assert checked.score == 3.0 and checked.output.startswith("ok\n") and bounds.output == "ok"
    assert "compute-sanitizer cross-check (not scored): 2 bounds findings" in checked.output
    assert "vector_add.cu:5: thread (232,0,0) of block (3,0,0)" in checked.output
    assert "racecheck: stopped after 300 s" in checked.output
    assert checked.evidence.sanitizer[0].errors == 3


def test_an_item_carries_only_the_cross_check_findings_of_its_own_check():
    runs = [
        sanitize.SanitizerRun("memcheck", tuple(parse(MEMCHECK, "memcheck")), 3),
        sanitize.SanitizerRun("racecheck", tuple(parse(RACECHECK_HAZARD, "racecheck")), 2),
    ]
    bounds = ItemResult(Item("vector_add", "bounds", "safety", 3.0, "bounds"), 0.0, "a finding")
    barriers = ItemResult(Item("vector_add", "barriers", "safety", 2.0, "barriers"), 2.0, "ok")
    checked = sanitize.with_cross_check(bounds, runs)
    assert checked.score == 0.0 and "(not scored): 2 bounds findings" in checked.output
    assert "window_sum.cu" not in checked.output
    assert [len(run.findings) for run in checked.evidence.sanitizer] == [2, 0]
    checked = sanitize.with_cross_check(barriers, runs)
    assert checked.score == 2.0 and "(not scored): 1 barriers finding" in checked.output
    assert "vector_add.cu" not in checked.output
    assert [len(run.findings) for run in checked.evidence.sanitizer] == [0, 1]
