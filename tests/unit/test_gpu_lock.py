"""The GPU lock (``backends/gpu_lock.py``): a timing never runs beside another task's kernels,
launches of tasks sharing a device run side by side, and waiting for the device never counts
against a call's time limit."""

import contextlib
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from autograder.backends import gpu_lock
from autograder.backends.worker import SHARED_BYTES, WorkerBackend
from autograder.contract import Buffer, Capabilities, Launch, Program, Scalar, Timing, TimingRequest

from .fake_backend import FakeBackend

# records when it ran (CLOCK_MONOTONIC is the machine's, the same in every process)
BUSY = (
    "import time\n"
    "def k(ctx, x, n):\n    x[0] = time.monotonic()\n    time.sleep(0.4)\n    x[1] = time.monotonic()\n"
)
ON_GPU = Capabilities(measures_time=True, runs_natively=True)


class Timer(FakeBackend):
    """A GPU stand-in whose timing takes 0.4 s and answers when it ran."""

    def time(self, request: TimingRequest) -> Timing:
        started = time.monotonic()
        time.sleep(0.4)
        return Timing(request.case, started, time.monotonic(), 0.0, 0.0, 1, 1, "stand-in")


def busy_launch(limit_s: float) -> Launch:
    args = (Buffer("x", np.zeros(2, np.float64), is_output=True), Scalar("n", 2))
    return Launch(Program(BUSY, "k.cu", "k"), (1, 1, 1), (1, 1, 1), args, time_limit_s=limit_s)


def call(worker: WorkerBackend, method: str) -> tuple[float, float]:
    """When ``worker``'s ``launch`` or ``time`` ran: a launch's limit is 0.7 s, which a launch that
    waited 0.4 s for the GPU and ran 0.4 s would pass only if the wait were not charged."""
    if method == "launch":
        return tuple(worker.launch(busy_launch(limit_s=0.7)).outputs["x"])
    timing = worker.time(TimingRequest((busy_launch(limit_s=0.7),), Program("", "k.cu", "k"), {}, 0.0, 0.0))
    return timing.student_ms, timing.reference_ms


def ran_side_by_side(
    capabilities: Capabilities, devices: tuple[str, str], monkeypatch, methods=("launch", "launch")
) -> list[tuple]:
    """Two graders' calls at once (``methods``), each from its own worker on the GPUs ``devices``
    name; when each ran."""
    workers = []
    for device in devices:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", device)  # as Ray sets it for a GPU task
        workers.append(WorkerBackend(Timer, "gpu", capabilities, compile_s=10))
    ran: list[tuple] = []

    def run(worker: WorkerBackend, method: str) -> None:
        ran.append(call(worker, method))

    try:
        for w in workers:
            w.prestart()
        for w in workers:
            w._ensure_started()  # both up before either calls: only the GPU's work competes
        threads = [threading.Thread(target=run, args=pair) for pair in zip(workers, methods, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for w in workers:
            w.close()
    assert len(ran) == 2, "a call failed (timed out waiting for the device?)"
    return sorted(ran)


def overlap(ran: list[tuple]) -> bool:
    (_, first_end), (second_start, _) = ran
    return second_start < first_end


@pytest.mark.parametrize("methods", [("time", "launch"), ("launch", "time"), ("time", "time")])
def test_a_timing_has_the_gpu_alone_and_the_wait_is_not_charged(monkeypatch, tmp_path, methods):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    ran = ran_side_by_side(ON_GPU, ("0", "0"), monkeypatch, methods)
    assert not overlap(ran)  # and neither timed out, though the second ended 0.8 s in: limit 0.7


def test_launches_of_tasks_sharing_a_gpu_run_side_by_side(monkeypatch, tmp_path):
    """Nobody times a launch: several share the GPU (and the test above can fail)."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert overlap(ran_side_by_side(ON_GPU, ("0", "0"), monkeypatch))


def test_tasks_on_different_gpus_and_emulators_do_not_wait(monkeypatch, tmp_path):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert overlap(ran_side_by_side(ON_GPU, ("0", "1"), monkeypatch, ("time", "time")))
    assert overlap(ran_side_by_side(Capabilities(), ("0", "0"), monkeypatch, ("time", "time")))


def test_a_waiting_timing_is_not_passed_by_launches_that_ask_after_it(tmp_path):
    """Launches keep arriving while one runs: a timing that asked before them goes first."""
    path = tmp_path / "gpu.lock"
    order: list[str] = []
    first_holds = threading.Event()

    def hold(name: str, alone: bool, seconds: float) -> None:
        with gpu_lock.held(path, alone):
            order.append(name)
            first_holds.set()
            time.sleep(seconds)

    first = threading.Thread(target=hold, args=("launch 1", False, 0.4))
    first.start()
    first_holds.wait()
    timing = threading.Thread(target=hold, args=("timing", True, 0.1))
    timing.start()
    time.sleep(0.1)  # the timing now waits for launch 1
    later = threading.Thread(target=hold, args=("launch 2", False, 0.1))
    later.start()
    for t in (first, timing, later):
        t.join()
    assert order == ["launch 1", "timing", "launch 2"]


@pytest.mark.parametrize(
    ("devices", "name"),
    [
        (None, "autograder-gpu-all.lock"),
        ("0", "autograder-gpu-0.lock"),
        ("GPU-1a/../b", "autograder-gpu-GPU-1a_.._b.lock"),
    ],
)
def test_the_lock_file_is_named_after_the_visible_gpus(monkeypatch, tmp_path, devices, name):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    if devices is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", devices)
    assert gpu_lock.lock_path() == tmp_path / name


def test_a_launchs_arrays_reach_its_worker_while_another_task_holds_the_gpu(monkeypatch, tmp_path):
    """Moving a case's arrays into the worker is host work: it overlaps the GPU's holder's turn,
    and only the kernel waits for the GPU."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    worker = WorkerBackend(FakeBackend, "gpu", ON_GPU, compile_s=10)
    data = np.random.default_rng(1).random(SHARED_BYTES // 8 * 4)  # not one value: it travels as bytes
    big = Buffer("x", data, is_output=True)  # in shared memory
    launch = Launch(Program(BUSY, "k.cu", "k"), (1, 1, 1), (1, 1, 1), (big, Scalar("n", 2)), time_limit_s=5)
    try:
        worker._ensure_started()
        with gpu_lock.held(gpu_lock.lock_path()):  # another task's turn on the GPU
            thread = threading.Thread(target=worker.launch, args=(launch,))
            thread.start()
            maps = Path(f"/proc/{worker._process.pid}/maps")
            deadline = time.monotonic() + 10
            while "autograder-message" not in maps.read_text() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert "autograder-message" in maps.read_text()  # mapped by the worker, kernel not run
            assert thread.is_alive()
        thread.join()
    finally:
        worker.close()


class Preparer(FakeBackend):
    """A GPU stand-in whose calls take 0.4 s to prepare their host memory, as page-locking a large
    case's arrays does (``Backend.prepared``); a launch's ``x[2:4]`` say when that began and ended."""

    @contextlib.contextmanager
    def prepared(self, argument):
        began = time.monotonic()
        time.sleep(0.4)
        self.readied = (began, time.monotonic())
        yield
        del self.readied  # nothing is left prepared after the call

    def launch(self, launch: Launch):
        result = super().launch(launch)
        result.outputs["x"][2:4] = self.readied
        return result


def prepared_launch(limit_s: float) -> Launch:
    args = (Buffer("x", np.zeros(4, np.float64), is_output=True), Scalar("n", 2))
    return Launch(Program(BUSY, "k.cu", "k"), (1, 1, 1), (1, 1, 1), args, time_limit_s=limit_s)


def test_a_call_is_prepared_before_the_gpu_is_asked_for_and_that_is_not_charged(monkeypatch, tmp_path):
    """Preparing (0.4 s) and the kernel (0.4 s) against a limit of 0.7 s: the limit starts at the go,
    after the worker said it was ready; and the kernel runs after its call was prepared."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    worker = WorkerBackend(Preparer, "gpu", ON_GPU, compile_s=10)
    try:
        started, ended, readying, readied = worker.launch(prepared_launch(limit_s=0.7)).outputs["x"]
    finally:
        worker.close()
    assert readying < readied <= started < ended


def test_the_gpu_is_free_for_others_while_a_call_is_prepared(monkeypatch, tmp_path):
    """A timing asking for the GPU while another task's worker prepares its launch gets it at once:
    the launch's grader asks for the GPU only once its worker is ready."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    worker = WorkerBackend(Preparer, "gpu", ON_GPU, compile_s=10)
    answers = []
    try:
        worker._ensure_started()
        thread = threading.Thread(target=lambda: answers.append(worker.launch(prepared_launch(limit_s=5))))
        thread.start()
        time.sleep(0.1)  # the worker is preparing
        with gpu_lock.held(gpu_lock.lock_path()):  # another task's timing
            had_it_at = time.monotonic()
            time.sleep(0.1)
        thread.join()
    finally:
        worker.close()
    started, _ended, _readying, readied = answers[0].outputs["x"]
    assert had_it_at < readied < started
