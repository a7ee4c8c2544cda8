import contextlib
import os
import pickle
import signal
import threading
import time
from multiprocessing.connection import Pipe
from pathlib import Path

import numpy as np
import pytest

from autograder.backends import registry
from autograder.backends.registry import Backends
from autograder.backends.worker import SHARED_BYTES, WorkerBackend, WorkerError, receive, send
from autograder.contract import (
    Buffer,
    Capabilities,
    CompileError,
    Launch,
    LaunchFailure,
    LaunchTimeout,
    Program,
    Scalar,
)
from autograder.grading import pipeline

from .fake_backend import FakeBackend

ADD = "def k(ctx, x, n):\n    x[:n] += 1\n"
HANG = "import time\ndef k(ctx, x, n):\n    while True:\n        time.sleep(0.01)\n"
EXIT = "import os\ndef k(ctx, x, n):\n    os._exit(3)\n"
SEGFAULT = "import ctypes\ndef k(ctx, x, n):\n    ctypes.string_at(0)\n"
BUG = "def k(ctx, x, n):\n    raise KeyError('emulator bug')\n"
CRASH = "from autograder.contract import LaunchFailure as F\ndef k(ctx, x, n):\n    raise F('x')\n"


def launch(source, limit_s=2.0):
    args = (Buffer("x", np.ones(4, np.float32), is_output=True), Scalar("n", 4))
    return Launch(Program(source, "k.cu", "k"), (1, 1, 1), (4, 1, 1), args, time_limit_s=limit_s)


@pytest.fixture
def worker():
    backend = WorkerBackend(FakeBackend, "emulator", compile_s=10)
    yield backend
    backend.close()


def test_launch_runs_in_the_worker_and_it_is_reused(worker):
    assert worker.launch(launch(ADD)).outputs["x"].tolist() == [2, 2, 2, 2]
    worker.launch(launch(ADD))
    assert worker.starts == 1


def test_the_worker_freezes_what_it_holds_before_it_exits(tmp_path):
    """Python's exit collects cyclic garbage over every object alive: the worker freezes them
    first (``worker.serve``), so that an emulator worker's exit does not pass over its decoded
    kernels and executors. Its exit handlers still run: one the kernel registered reads the
    frozen count as the worker exits."""
    record = tmp_path / "frozen"
    kernel = (
        "import atexit, gc\n"
        "def k(ctx, x, n):\n"
        f"    atexit.register(lambda: open({str(record)!r}, 'w').write(str(gc.get_freeze_count())))\n"
    )
    backend = WorkerBackend(FakeBackend, "emulator", compile_s=10)
    backend.launch(launch(kernel))
    backend.close()
    assert int(record.read_text()) > 1000


def test_a_hung_kernel_is_killed_at_its_limit_and_the_worker_restarts(worker):
    worker.launch(launch(ADD))
    started = time.monotonic()
    with pytest.raises(LaunchTimeout, match=r"did not finish within 0\.5 s"):
        worker.launch(launch(HANG, limit_s=0.5))
    assert time.monotonic() - started < 5
    assert worker.launch(launch(ADD)).outputs["x"][0] == 2
    assert worker.starts == 2


SPAWN_AND_HANG = (
    "import subprocess, sys, time\n"
    "def k(ctx, x, n):\n"
    "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "    with open(PID_FILE, 'w') as f:\n        f.write(str(child.pid))\n"
    "    while True:\n        time.sleep(0.01)\n"
)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie that nobody reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in "ZX"


def test_a_timeout_kills_the_workers_whole_process_group(worker, tmp_path):
    # a watcher (compute-sanitizer) or anything the kernel started must not outlive the call
    pid_file = tmp_path / "pid"
    source = f"PID_FILE = {str(pid_file)!r}\n" + SPAWN_AND_HANG
    with pytest.raises(LaunchTimeout):
        worker.launch(launch(source, limit_s=2.0))
    child = int(pid_file.read_text())
    try:
        deadline = time.monotonic() + 5
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize(("source", "how"), [(EXIT, "exit code 3"), (SEGFAULT, "signal SIGSEGV")])
def test_a_crashing_kernel_fails_its_launch_and_the_next_runs(worker, source, how):
    with pytest.raises(LaunchFailure, match=rf"crashed the grading worker \({how}\)"):
        worker.launch(launch(source))
    assert worker.launch(launch(ADD)).outputs["x"][0] == 2


def test_a_launch_failure_reported_by_the_backend_restarts_the_worker(worker):
    with pytest.raises(LaunchFailure, match="x"):
        worker.launch(launch(CRASH))
    assert worker.launch(launch(ADD)).outputs["x"][0] == 2
    assert worker.starts == 2


def test_a_worker_that_died_while_idle_is_replaced(worker):
    worker.launch(launch(ADD))
    worker._process.kill()
    worker._process.wait()
    assert worker.launch(launch(ADD)).outputs["x"][0] == 2
    assert worker.starts == 2


def test_compile_error_crosses_with_its_log(worker):
    with pytest.raises(CompileError) as error:
        worker.compile(Program("def k():\n#error expected a ';'\n", "k.cu", "k"))
    assert error.value.log == "k.cu(2): error: expected a ';'"
    assert str(error.value) == "compilation failed:\nk.cu(2): error: expected a ';'"


def test_an_unexpected_error_is_a_grader_error_with_the_traceback(worker):
    with pytest.raises(WorkerError, match="KeyError: 'emulator bug'"):
        worker.launch(launch(BUG))


UNPICKLABLE = "def k(ctx, x, n):\n    ctx.finding('shared_race', 'm', others=lambda: 0)\n"
SLOW = "import time\ndef k(ctx, x, n):\n    time.sleep(1)\n    x[:n] += 10\n"


def test_a_result_that_cannot_cross_the_pipe_is_a_grader_error_and_the_next_runs(worker):
    with pytest.raises(WorkerError, match="pickle"):
        worker.launch(launch(UNPICKLABLE))
    assert worker.launch(launch(ADD)).outputs["x"][0] == 2


def test_after_an_interrupted_launch_the_next_call_gets_its_own_answer(worker):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            worker.launch(launch(SLOW))
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert worker.launch(launch(ADD)).outputs["x"][0] == 2  # not the slow launch's 11


def slow_to_start():
    time.sleep(1.0)
    return FakeBackend()


def test_an_interrupt_while_the_worker_starts_leaves_nothing_for_the_next_call():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    worker = WorkerBackend(slow_to_start, "emulator")
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # the worker is up and building its backend
        with pytest.raises(KeyboardInterrupt):
            worker.launch(launch(ADD))
        signal.signal(signal.SIGALRM, previous)
        assert worker.launch(launch(ADD)).outputs["x"][0] == 2  # not the first worker's "ready"
    finally:
        signal.signal(signal.SIGALRM, previous)
        worker.close()


def test_pipeline_grades_the_rest_after_a_hang_and_a_crash(course, submit):
    hang_on_ragged = (
        "import os, time\n"
        "def vec(ctx, a, b, c, n):\n"
        "    if n == 1:\n        os._exit(1)\n"
        "    if n == 70 and ctx.block[0] == 32 and c.size == 70 and a[0] != 0:\n"
        "        while True:\n            time.sleep(0.01)\n"
        "    c[:n] = a[:n] + b[:n]\n"
    )
    worker = WorkerBackend(FakeBackend, "emulator")
    try:
        backends = Backends(worker, worker)
        graded = pipeline.grade_submission(submit(vec=hang_on_ragged), course, backends, 5)
    finally:
        worker.close()
    results = {r.item.name: r for r in graded.items}
    assert results["vec correctness (aligned)"].score == 2
    ragged = results["vec correctness (ragged)"]
    assert ragged.score == 0 and "exit code 1" in ragged.output
    assert "did not finish within 3 s" in ragged.output


OOM_SCORE = "def k(ctx, x, n):\n    x[0] = int(open('/proc/self/oom_score_adj').read())\n"
HOG = "def k(ctx, x, n):\n    x[0] = len(bytearray(512 << 20))\n"


def test_the_worker_goes_first_under_memory_pressure_and_its_data_is_capped():
    capped = WorkerBackend(FakeBackend, "emulator", compile_s=10, memory_mb=256)
    try:
        assert capped.launch(launch(OOM_SCORE)).outputs["x"][0] == 1000
        with pytest.raises(WorkerError, match="MemoryError"):
            capped.launch(launch(HOG))
        assert capped.launch(launch(ADD)).outputs["x"].tolist() == [2, 2, 2, 2]
    finally:
        capped.close()


def test_large_arrays_cross_in_shared_memory_bit_for_bit():
    n = SHARED_BYTES  # elements: every array below is over the threshold
    arrays = {
        "random": np.random.default_rng(0).random(n, np.float32),
        "poisoned": np.full(n, np.nan, np.float32),  # one value throughout: sent as that value
        "sentinel": np.full((n // 2, 2), np.iinfo(np.int32).min, np.int32),
        "half": np.full(n, -0.0, np.float16),
        "almost": np.r_[np.zeros(n, np.float64), 1.0],
        "small": np.arange(5),
    }
    left, right = Pipe()
    try:
        sender = threading.Thread(target=send, args=(left, ("ok", arrays)))
        sender.start()
        status, received = receive(right)
        sender.join()
    finally:
        left.close()
        right.close()
    assert status == "ok"
    for name, sent in arrays.items():
        got = received[name]
        assert (got.dtype, got.shape, got.flags.writeable) == (sent.dtype, sent.shape, True), name
        assert got.tobytes() == sent.tobytes(), name


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


SMALL_ARRAYS = {
    "float32": np.random.default_rng(1).random(7, np.float32),
    "matrix": np.arange(12, dtype=np.int64).reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(12, dtype=np.uint16).reshape(3, 4)),
    "strided": np.arange(10, dtype=np.float64)[::2],
    "read_only": _read_only(np.arange(5, dtype=np.int32)),
    "empty": np.zeros(0, np.int8),
    "scalar": np.array(3.5, np.float16),
    "bools": np.array([True, False]),
    "complex": np.array([1 + 2j], np.complex64),
    "big_endian": np.arange(3, dtype=">i4"),
    "record": np.zeros(2, [("a", np.int32), ("b", np.float32)]),
    "objects": np.array([1, "x"], object),
}


@pytest.mark.parametrize("name", SMALL_ARRAYS)
def test_small_arrays_cross_as_numpy_would_send_them(name):
    sent = SMALL_ARRAYS[name]
    left, right = Pipe()
    try:
        send(left, ("ok", {name: sent}))
        got = receive(right)[1][name]
    finally:
        left.close()
        right.close()
    expected = pickle.loads(pickle.dumps(sent, protocol=5))
    flags = ("WRITEABLE", "C_CONTIGUOUS", "F_CONTIGUOUS")
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    assert [got.flags[f] for f in flags] == [expected.flags[f] for f in flags]
    assert got.tobytes() == expected.tobytes() or name == "objects"
    assert got.tolist() == sent.tolist()


def test_a_large_launch_runs_in_the_worker(worker):
    big = Launch(
        Program(ADD, "k.cu", "k"),
        (1, 1, 1),
        (4, 1, 1),
        (Buffer("x", np.ones(1 << 20, np.float32), is_output=True), Scalar("n", 1 << 20)),
        time_limit_s=10,
    )
    assert (worker.launch(big).outputs["x"] == 2).all()


class _Recorded:
    """A backend that says whether its worker was started beforehand."""

    def __init__(self, sees_every_access: bool):
        self.capabilities = Capabilities(sees_every_access=sees_every_access)
        self.prestarted = self.closed = False

    def prestart(self):
        self.prestarted = True

    def close(self):
        self.closed = True


@pytest.mark.parametrize("safety_checks", [True, False])
def test_the_safety_worker_starts_beforehand_only_when_safety_checks_run(monkeypatch, safety_checks):
    made = {"gpu": _Recorded(False), "emulator": _Recorded(True)}
    monkeypatch.setattr(registry, "select_backend", lambda name, *_args: made[name])
    with registry.open_backends("gpu", safety_checks=safety_checks) as backends:
        assert backends.grading is made["gpu"] and backends.safety is made["emulator"]
    assert made["gpu"].prestarted and made["emulator"].prestarted == safety_checks
    assert made["gpu"].closed and made["emulator"].closed
