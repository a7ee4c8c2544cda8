"""``autograder serve`` in process (FastAPI's TestClient, no socket), with stand-ins for Ray.

A stand-in has RayJobs' ``start``, ``run`` and ``stop``: ``Canned`` answers at once and records
every job (so "nothing run" is checkable), ``Held`` waits until released (or cancelled, past the
deadline), ``Threaded`` runs the real task, ``batch.grade_files``, in a thread. The service on
real Ray and a real socket is tests/delivery/test_gpu_service.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install -e '.[serve]'")

from fastapi.testclient import TestClient

from autograder import batch, serve
from autograder.gpu_service import Token
from autograder.model import read_course
from autograder.policy import MAX_SOURCE_BYTES

ROOT = Path(__file__).resolve().parents[2]
COURSE = read_course(ROOT)
SOURCE = (ROOT / "reference/vector_add.cu").read_text()
TOKENS = [Token("gradescope", "g" * 24), Token("ta", "t" * 24)]
BEARER = {"Authorization": f"Bearer {'g' * 24}"}
JOB = {"assignment": "vector_add", "source": SOURCE, "seed": 5}


class Canned:
    """Answers every job at once with ``answer``; records each."""

    def __init__(self, answer: dict | None = None):
        self.answer = answer or {"exit": 2, "reason": "grading failed: nothing to see", "files": {}}
        self.calls: list[tuple] = []
        self.stopped = False

    def start(self, course_data, settings):
        self.course = course_data
        return settings

    async def run(self, files, seed, settings):
        self.calls.append((files, seed, settings))
        return self.answer

    def stop(self):
        self.stopped = True


class Held(Canned):
    """Holds every job until ``release`` is set; counts the jobs cancelled while held."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.cancelled = 0

    async def run(self, files, seed, settings):
        self.calls.append((files, seed, settings))
        try:
            await asyncio.to_thread(self.release.wait, 30)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.answer


class Threaded(Canned):
    """The real task, ``batch.grade_files``, in a thread instead of on a Ray worker."""

    async def run(self, files, seed, settings):
        self.calls.append((files, seed, settings))
        return await asyncio.to_thread(batch.grade_files, self.course, files, seed, settings)


def client(jobs, **settings) -> TestClient:
    options = {"backend": "emulator", "deadline_s": 60.0, "per_minute": 100, "concurrent": 10, **settings}
    return TestClient(serve.create_app(COURSE, serve.ServeSettings(**options), TOKENS, jobs))


def in_thread(call) -> tuple[threading.Thread, list]:
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(call()))
    thread.start()
    return thread, answers


def queue_reaches(c: TestClient, n: int) -> bool:
    deadline = time.monotonic() + 10
    while c.get("/v1/health").json()["queue"] != n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer " + "x" * 24},
        {"Authorization": "Bearer " + "g" * 23},
        {"Authorization": "Basic " + "g" * 24},
        {"Authorization": "g" * 24},
        {"Authorization": "Bearer " + "G" * 24},
    ],
)
def test_a_wrong_or_missing_token_is_401_and_nothing_is_run(headers, capsys):
    jobs = Canned()
    with client(jobs) as c:
        answer = c.post("/v1/grade", headers=headers, json=JOB)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer"
    assert jobs.calls == []
    assert "refused token=- status=401" in capsys.readouterr().err


def test_an_oversize_source_or_body_is_413_and_nothing_is_run():
    jobs = Canned()
    with client(jobs) as c:
        big = c.post("/v1/grade", headers=BEARER, json={**JOB, "source": "x" * (MAX_SOURCE_BYTES + 1)})
        huge = c.post("/v1/grade", headers=BEARER, content=b" " * (serve.MAX_REQUEST_BYTES + 1))
        fits = c.post("/v1/grade", headers=BEARER, json={**JOB, "source": "x" * MAX_SOURCE_BYTES})
    assert (big.status_code, huge.status_code, fits.status_code) == (413, 413, 200)
    assert big.json()["detail"] == f"a kernel is at most {MAX_SOURCE_BYTES} bytes"
    assert len(jobs.calls) == 1


@pytest.mark.parametrize(
    "body",
    [
        {**JOB, "assignment": "vector_subtract"},
        {**JOB, "seed": -1},
        {**JOB, "seed": 1 << 63},
        {**JOB, "seed": "5"},
        {**JOB, "deadline_s": 0},
        {**JOB, "shell": "rm -rf /"},
        {"assignment": "vector_add", "source": SOURCE},
        [JOB],
    ],
)
def test_a_request_that_is_not_a_known_assignments_job_is_422_and_nothing_is_run(body):
    jobs = Canned()
    with client(jobs) as c:
        answer = c.post("/v1/grade", headers=BEARER, json=body)
    assert answer.status_code == 422 and jobs.calls == []
    assert SOURCE not in answer.text  # the caller's input is never echoed


def test_an_unknown_assignment_names_the_known_ones():
    with client(Canned()) as c:
        answer = c.post("/v1/grade", headers=BEARER, json={**JOB, "assignment": "vector_subtract"}).json()
    assert answer == {
        "detail": "unknown assignment 'vector_subtract'",
        "known": list(COURSE.rubric.assignments),
    }


def test_past_the_per_minute_limit_a_token_gets_429_and_another_token_does_not():
    jobs = Canned()
    with client(jobs, per_minute=2) as c:
        codes = [c.post("/v1/grade", headers=BEARER, json=JOB).status_code for _ in range(3)]
        other = c.post("/v1/grade", headers={"Authorization": f"Bearer {'t' * 24}"}, json=JOB)
    assert codes == [200, 200, 429] and other.status_code == 200
    assert len(jobs.calls) == 3


def test_past_the_concurrent_limit_a_token_gets_429_and_health_shows_the_queue():
    jobs = Held()
    other_token = {"Authorization": f"Bearer {'t' * 24}"}
    with client(jobs, concurrent=1) as c:
        try:
            assert c.get("/v1/health").json() == {"status": "ok", "backend": "emulator", "queue": 0}
            first, answers = in_thread(lambda: c.post("/v1/grade", headers=BEARER, json=JOB))
            assert queue_reaches(c, 1)
            second, refusals = in_thread(lambda: c.post("/v1/grade", headers=BEARER, json=JOB))
            second.join(5)
            assert refusals and refusals[0].status_code == 429, "the second job was not refused"
            assert "1 jobs of this token are already running" in refusals[0].text
            other, others = in_thread(lambda: c.post("/v1/grade", headers=other_token, json=JOB))
            assert queue_reaches(c, 2)
        finally:
            jobs.release.set()
        first.join(10)
        other.join(10)
        assert queue_reaches(c, 0)
    assert answers[0].status_code == 200 and others[0].status_code == 200


def test_a_job_past_its_deadline_is_cancelled_and_its_items_say_not_run(capsys):
    jobs = Held()
    with client(jobs, deadline_s=0.3) as c:
        answer = c.post("/v1/grade", headers=BEARER, json=JOB).json()
        shorter = c.post("/v1/grade", headers=BEARER, json={**JOB, "deadline_s": 0.1}).json()
        assert queue_reaches(c, 0)
        jobs.release.set()  # the cancelled jobs' threads end
    assert jobs.cancelled == 2
    assert answer["status"] == "not run" and answer["reason"] == "did not answer within 0.3 s"
    items = COURSE.rubric.assignments["vector_add"]
    assert [i["name"] for i in answer["items"]] == [item.name for item in items]
    for entry in answer["items"]:
        assert entry["score"] == 0 and "regrade" in entry["tags"]
        assert entry["output"] == "```\nnot run: the GPU service did not answer within 0.3 s\n```"
        assert entry["not_run"] == "the GPU service did not answer within 0.3 s"
    assert shorter["reason"] == "did not answer within 0.1 s"
    log = capsys.readouterr().err
    assert (
        "job token=gradescope assignment=vector_add seed=5 status='not run' seconds=0.3 why=deadline" in log
    )


def test_a_job_whose_grader_failed_says_not_run_and_the_log_says_why(capsys):
    with client(Canned()) as c:
        answer = c.post("/v1/grade", headers=BEARER, json=JOB).json()
    assert answer["reason"] == "could not grade it (its grader failed)"
    assert "why='grading failed: nothing to see'" in capsys.readouterr().err


def test_a_graded_job_answers_what_grade_writes_for_that_kernel_and_seed(tmp_path, capsys):
    jobs = Threaded()
    with client(jobs) as c:
        answer = c.post("/v1/grade", headers=BEARER, json=JOB)
    assert jobs.stopped
    assert answer.status_code == 200, answer.text
    files, seed, settings = jobs.calls[0]
    assert files == {"vector_add.cu": SOURCE.encode()} and seed == 5
    assert settings.assignments == ("vector_add",) and settings.limit_s == COURSE.rubric.limits.submission_s
    command = [sys.executable, "-m", "autograder", "grade", str(ROOT / "reference"), "--course", str(ROOT)]
    command += ["--backend", "emulator", "--assignment", "vector_add", "--seed", "5"]
    command += ["--results", str(tmp_path / "results.json"), "--report", str(tmp_path / "report")]
    subprocess.run(command, capture_output=True, timeout=300, check=True)
    alone = json.loads((tmp_path / "results.json").read_text())["tests"]
    details = json.loads((tmp_path / "report.json").read_text())["items"]
    answered = answer.json()
    assert answered["status"] == "graded" and answered["backend"] == "emulator"
    assert [{k: v for k, v in i.items() if k in alone[0]} for i in answered["items"]] == alone
    assert [i["feedback"] for i in answered["items"]] == [d["output"] for d in details]
    assert [i["not_run"] for i in answered["items"]] == [d["not_run"] for d in details]
    assert answered["items"][-1]["not_run"] == "needs a GPU"  # the emulator cannot time
    assert "job token=gradescope assignment=vector_add seed=5 status=graded" in capsys.readouterr().err
