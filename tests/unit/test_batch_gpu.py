"""``autograder batch`` on a GPU, without Ray or a GPU: the GPU task's grading (``grade
--timed-only``), its answer merged by the CPU task's (``grade --gpu-answer``) exactly as a GPU
service's answer is, and the GPU part recorded for the TA.

The fake backends stand in for both machines: ``Timing`` times like a GPU (and records every
launch), the emulator-like fake grades everything else. The Ray wiring (the two tasks, a logical
GPU) is in tests/delivery/test_batch.py.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from click.testing import CliRunner

from autograder import cli
from autograder.backends.registry import Backends
from autograder.contract import Capabilities, Timing
from autograder.delivery import batch, gpu_service
from autograder.delivery.batch import Job, Submission

from .fake_backend import FakeBackend, open_fake_backends
from .test_gpu_service_client import PERF, by_name
from .test_gpu_service_client import service as service  # a fixture

GPU_NOTE = "(graded on a GPU, on the gpu backend)"


class Recording(FakeBackend):
    """A fake backend that keeps every launch it is asked for; ``timing``: it times like a GPU."""

    def __init__(self, timing: bool):
        capabilities = Capabilities(measures_time=True, runs_natively=True) if timing else None
        super().__init__("gpu", capabilities) if timing else super().__init__()
        self.launched, self.timed = [], []

    def launch(self, launch):
        self.launched.append(dict(launch.program.defines))
        return super().launch(launch)

    def time(self, request):
        self.timed.append(request.case)
        return Timing(request.case, 1.0, 1.1, 0.001, 0.001, 30, len(request.student), "fake")


@pytest.fixture
def gpu(monkeypatch):
    """``grade``'s backends: a timing grading backend and an emulator-like safety one, both kept."""
    pair = Backends(grading=Recording(timing=True), safety=Recording(timing=False))

    @contextlib.contextmanager
    def opened(name, compile_s=60, emulator_mb=None, safety_checks=True):
        pair.safety.asked_for = safety_checks  # type: ignore[attr-defined]
        yield pair

    monkeypatch.setattr(cli.shared, "open_backends", opened)
    return pair


def grade(course_root, out, *extra, submission="reference", env=None):
    """``autograder grade`` of the fake course's vec (seed 11) into ``out``: its files."""
    args = ["grade", str(course_root / submission), "--course", str(course_root), "--seed", "11"]
    args += ["--assignment", "vec", "--results", str(out / "results.json"), "--report", str(out / "report")]
    env = env or {gpu_service.URL_VARIABLE: None, gpu_service.TOKEN_VARIABLE: None}
    outcome = CliRunner().invoke(cli.main, [*args, *extra], env=env)
    assert outcome.exit_code == 0, outcome.output
    return {name: (out / name).read_bytes() for name in ("results.json", "report.json", "report.md")}


def test_the_gpu_task_grades_the_timed_items_alone_and_launches_only_what_gates_them(
    course_root, tmp_path, gpu
):
    files = grade(course_root, tmp_path / "gpu", "--timed-only")
    tests = json.loads(files["results.json"])["tests"]
    assert [(t["name"], t["score"]) for t in tests] == [(PERF, 1.0)]  # timed, full marks
    assert gpu.safety.launched == []  # no bounds, barriers or traffic case on the emulator
    assert gpu.safety.asked_for is False  # so its worker is not started beside the GPU's
    # on the GPU: the correctness cases (the timed item's first gate) and its own, then the timing
    sizes = sorted(case["n"] for case in gpu.grading.timed)
    assert sizes == [1024] and {"safety"} not in [set(d) for d in gpu.grading.launched]
    perf_launches = [d for d in gpu.grading.launched if d == {"BLOCK": "32"}]
    assert len(gpu.grading.launched) == len(perf_launches) == 4  # aligned 1, ragged 2, perf 1


def test_a_timed_only_grading_of_a_wrong_kernel_is_gated_as_a_whole_grading_is(course_root, tmp_path, gpu):
    whole = json.loads(grade(course_root, tmp_path / "whole", submission="starter")["results.json"])
    timed = json.loads(
        grade(course_root, tmp_path / "timed", "--timed-only", submission="starter")["results.json"]
    )
    assert timed["tests"] == [by_name(whole["tests"])[PERF]]
    assert "not awarded: your kernel is not correct" in timed["tests"][0]["output"]
    assert gpu.grading.timed == []


@pytest.fixture
def timed(course_root, tmp_path, gpu, monkeypatch):
    """What the GPU task answers for the fake course's reference (its grade run on the timing fake)."""
    files = grade(course_root, tmp_path / "gpu", "--timed-only")
    gpu_part = {"ran_at": "2026-12-03T10:00:00+00:00", "busy_s": 4.25}
    monkeypatch.setattr(cli.shared, "open_backends", open_fake_backends)  # the CPU side: the emulator
    return {"exit": 0, "reason": None, "files": files, "elapsed_s": 4.25, "gpu": gpu_part}


def answered(course_root, out, timed):
    answer = out.parent / f"{out.name}-answer.json"
    answer.write_text(json.dumps(batch.timed_answer(timed, "gpu")))
    return grade(course_root, out, "--gpu-answer", str(answer))


def test_the_cpu_task_takes_the_timed_verdict_and_the_rest_is_the_emulators_grading(
    course_root, tmp_path, timed
):
    alone = json.loads(grade(course_root, tmp_path / "alone")["results.json"])
    merged = answered(course_root, tmp_path / "cpu", timed)
    results, report = json.loads(merged["results.json"]), json.loads(merged["report.json"])
    perf = by_name(results["tests"])[PERF]
    assert perf["score"] == 1.0 and "regrade" not in perf["tags"] and GPU_NOTE in perf["output"]
    assert results["score"] == alone["score"] + 1.0
    assert [t for t in results["tests"] if t["name"] != PERF] == [
        t for t in alone["tests"] if t["name"] != PERF
    ]
    item = by_name(report["items"])[PERF]
    assert item["not_run"] is None and item["evidence"]["gpu_service"] == {"backend": "gpu"}
    assert item["evidence"]["ratio"]["metric"] == "time"


def test_batch_gives_the_verdict_a_gradescope_grading_with_the_gpu_service_gives(
    course_root, tmp_path, timed, service
):
    """The same answer, from the GPU task or from a service: the same score, feedback and evidence;
    only who graded it differs (the note after the feedback, the service's URL)."""
    service.reply = (200, json.dumps(batch.timed_answer(timed, "gpu")).encode(), 0.0)
    env = {gpu_service.URL_VARIABLE: service.url, gpu_service.TOKEN_VARIABLE: "course-token-0123456789"}
    by_service = json.loads(grade(course_root, tmp_path / "service", env=env)["report.json"])
    by_batch = json.loads(answered(course_root, tmp_path / "cpu", timed)["report.json"])
    note = "(graded on the GPU service, on its gpu backend)"
    for mine, theirs in zip(by_batch["items"], by_service["items"], strict=True):
        theirs["output"] = theirs["output"].replace(note, GPU_NOTE)
        theirs["evidence"].get("gpu_service", {}).pop("url", None)
        assert stable(mine) == stable(theirs), mine["name"]
    assert by_batch["score"] == by_service["score"]


def stable(value):
    """``value`` without the wall times of its cases (each run's own)."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def test_a_gpu_task_that_failed_leaves_the_timed_item_not_run_with_a_plain_reason(
    course_root, tmp_path, timed
):
    failed = {
        **timed,
        "exit": 2,
        "reason": "grading failed: OSError: /tmp/autograder-batch-x/out",
        "files": {},
    }
    merged = answered(course_root, tmp_path / "cpu", failed)
    results = json.loads(merged["results.json"])
    perf = by_name(results["tests"])[PERF]
    assert perf["score"] == 0 and "regrade" in perf["tags"]
    assert "(the GPU grading could not grade it (its grader failed))" in perf["output"]
    text = json.dumps(results)
    assert "/tmp/" not in text and "OSError" not in text and "Traceback" not in text


def test_the_report_says_when_the_gpu_part_ran_and_how_long_it_held_the_gpu(course, tmp_path, timed):
    done = {"exit": 0, "reason": None, "elapsed_s": 9.0, "files": {**timed["files"], "grade.log": b"cpu\n"}}
    timed = {**timed, "files": {**timed["files"], "grade.log": b"ok 1 / 1 vec performance (perf)\n"}}
    answer = batch.with_gpu_part(done, timed)
    outcome = batch.store(tmp_path, Job(Submission("s", tmp_path), "k", {}), answer, course)
    report = json.loads((tmp_path / "s/report.json").read_text())
    assert report["gpu"] == {**timed["gpu"], "status": "graded", "reason": None}
    assert (
        "ran on a GPU at 2026-12-03T10:00:00+00:00, holding it 4.2 s"
        in (tmp_path / "s/report.md").read_text()
    )
    assert (
        (tmp_path / "s/grade.log")
        .read_bytes()
        .endswith(b"(grade --timed-only) ---\nok 1 / 1 vec performance (perf)\n")
    )
    assert outcome.gpu_s == 4.25 and outcome.status == "graded"


@pytest.mark.parametrize(("backend", "share"), [("gpu", 1 / 3), ("emulator", 0.0)])
def test_tasks_that_run_kernels_ask_ray_for_their_share_of_a_gpu(monkeypatch, backend, share):
    """Batch's GPU tasks and the service's jobs each ask for a third of a GPU (a timing alone on it
    through gpu_lock); a CPU task, and anything on the emulator, for none."""
    asked = {}
    monkeypatch.setattr(
        batch, "_task", lambda function, cpus, gpus: asked.setdefault(function.__name__, (cpus, gpus))
    )
    settings = batch.Settings(backend, seed=1)
    batch.Tasks.of(settings)
    if backend == "gpu":
        assert asked.pop("time_files") == (0, share)  # no CPU: it never waits behind CPU tasks
    assert asked.pop("grade_files") == (1, 0)
    batch.whole_task(settings)
    assert asked == {"grade_files": (1, share)}
