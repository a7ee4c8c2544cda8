"""``autograder serve`` in process (FastAPI's TestClient), with stand-ins for Ray.

A stand-in has RayJobs' ``start``, ``run`` and ``stop``: ``Canned`` answers at once and records
every job (so "nothing run" is checkable), ``Held`` waits until released (or cancelled, past the
deadline), ``Threaded`` runs the real task, ``batch.grade_files``, in a thread. What a real socket is
needed for (slow clients, the connection limit, the access log) runs the app under uvicorn as
``autograder serve`` configures it, in a thread on loopback (``listening``). The service on real
Ray is tests/delivery/test_gpu_service.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest.mock import Mock

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install -e '.[serve]'")

import uvicorn
from click.testing import CliRunner
from fastapi.testclient import TestClient

from autograder import cli
from autograder.course.folder import read_course
from autograder.course.policy import MAX_SOURCE_BYTES
from autograder.delivery import batch, serve
from autograder.delivery.gpu_service import Token

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


@pytest.fixture(autouse=True)
def service_log(caplog):
    """The service's log at INFO, as ``autograder serve`` sets it by default; read as ``caplog.text``."""
    caplog.set_level(logging.INFO)


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
def test_a_wrong_or_missing_token_is_401_and_nothing_is_run(headers, caplog):
    jobs = Canned()
    with client(jobs) as c:
        answer = c.post("/v1/grade", headers=headers, json=JOB)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer"
    assert jobs.calls == []
    assert "refused token=- status=401" in caplog.text


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


def test_a_job_past_its_deadline_is_cancelled_and_its_items_say_not_run(caplog):
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
    assert (
        "job token=gradescope assignment=vector_add seed=5 status='not run' seconds=0.3 why=deadline"
        in caplog.text
    )


def test_a_job_whose_grader_failed_says_not_run_and_the_log_says_why(caplog):
    with client(Canned()) as c:
        answer = c.post("/v1/grade", headers=BEARER, json=JOB).json()
    assert answer["reason"] == "could not grade it (its grader failed)"
    assert "why='grading failed: nothing to see'" in caplog.text


@pytest.mark.parametrize(
    ("sent", "written"),
    [
        ("attempt1.cu", "attempt1.cu"),  # the student's own name, which their feedback then names
        (None, "vector_add.cu"),
        ("../../etc/x.cu", "vector_add.cu"),  # never a path
        ("/abs.cu", "vector_add.cu"),
        ("sub/attempt1.cu", "vector_add.cu"),
        ("notes.txt", "vector_add.cu"),
        (".hidden.cu", "vector_add.cu"),
    ],
)
def test_the_kernel_is_graded_under_the_students_file_name_when_it_is_a_plain_one(sent, written):
    jobs = Canned()
    with client(jobs) as c:
        c.post("/v1/grade", headers=BEARER, json={**JOB, "filename": sent})
    files, _seed, _settings = jobs.calls[0]
    assert list(files) == [written]


def test_a_graded_job_answers_what_grade_writes_for_that_kernel_and_seed(tmp_path, caplog):
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
    assert "job token=gradescope assignment=vector_add seed=5 status=graded" in caplog.text


@contextlib.contextmanager
def listening(jobs, **settings):
    """The app under uvicorn as ``autograder serve`` runs it (``serve.server_config``), in a thread
    on a free port of loopback; yields the port. The access log goes to sys.stdout (capsys)."""
    options = {"backend": "emulator", "deadline_s": 60.0, "per_minute": 100, "concurrent": 10, **settings}
    chosen = serve.ServeSettings(**options)
    app = serve.create_app(COURSE, chosen, TOKENS, jobs)
    server = uvicorn.Server(serve.server_config(app, chosen, TOKENS, "127.0.0.1", 0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert server.started, "uvicorn did not start"
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


def held(port: int, sent: bytes, trickled: bytes = b"", limit_s: float = 5.0) -> tuple[float, bytes]:
    """Seconds until the server closed a connection that sent ``sent``, then ``trickled`` a byte
    every 0.1 s, and what it answered; ``limit_s`` when it was still open then."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        started, answer = time.monotonic(), b""
        s.sendall(sent)
        while time.monotonic() - started < limit_s:
            try:
                s.send(b"" if answer else trickled[:1])  # once answered, a client stops sending
            except OSError:  # closed by the server
                return time.monotonic() - started, answer
            trickled = trickled[1:]
            if select.select([s], [], [], 0.1)[0]:
                try:
                    data = s.recv(1 << 16)
                except OSError:  # reset: the server closed with a trickled byte unread
                    data = b""
                if not data:
                    return time.monotonic() - started, answer
                answer += data
        return limit_s, answer


def get_health(port: int) -> bytes:
    return held(port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[1]


def test_the_access_log_shows_no_query_string_and_no_token(capsys, caplog):
    secret = TOKENS[0].secret
    with listening(Canned()) as port:
        for target in (f"/v1/grade?token={secret}", f"/v1/grade/{secret}"):
            request = (
                f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
            )
            held(port, request.encode())
    written = capsys.readouterr()
    access = [line for line in written.out.splitlines() if "/v1/grade" in line]
    assert len(access) == 2, written.out
    assert access[0].endswith('"POST /v1/grade HTTP/1.1" 401 Unauthorized')
    assert access[1].endswith('"POST /v1/grade/[token] HTTP/1.1" 404 Not Found')
    assert secret not in written.out + written.err + caplog.text and "token=" not in written.out


def test_a_client_trickling_its_request_line_is_dropped_at_the_read_timeout(caplog):
    line = b"POST /v1/grade HTTP/1.1\r\nX-Slow: " + b"a" * 100
    with listening(Canned(), read_s=0.5) as port:
        slow, answer = held(port, b"", line)
        idle, _ = held(port, b"")
    assert 0.4 < slow < 3 and 0.4 < idle < 3 and answer == b""
    assert "dropped why='no request within 0.5 s'" in caplog.text


def test_a_client_trickling_its_body_is_answered_408_at_the_read_timeout():
    jobs = Canned()
    headers = f"POST /v1/grade HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {'g' * 24}\r\n"
    with listening(jobs, read_s=0.5) as port:
        seconds, answer = held(port, f"{headers}Content-Length: 1000\r\n\r\n".encode(), b" " * 100)
    assert 0.4 < seconds < 3 and answer.startswith(b"HTTP/1.1 408 "), (seconds, answer)
    assert b"the request's body did not arrive within 0.5 s" in answer and jobs.calls == []


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout():
    with listening(Canned(), keep_alive_s=0.5) as port:
        seconds, answer = held(port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ") and 0.4 < seconds < 3


def test_past_the_connection_limit_requests_are_503_until_slow_clients_are_dropped():
    with listening(Canned(), connections=3, read_s=1.0) as port:
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        try:
            refused_while_held = get_health(port)
            time.sleep(1.5)
            answered_after = get_health(port)
        finally:
            for s in silent:
                s.close()
    assert refused_while_held.startswith(b"HTTP/1.1 503 ")
    assert answered_after.startswith(b"HTTP/1.1 200 ")


def test_serve_passes_its_timeouts_and_limit_to_uvicorn(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(serve, "create_app", lambda course, settings, tokens: "app")
    monkeypatch.setattr(uvicorn, "Server", lambda config: started.append(config) or Mock())
    (tmp_path / "tokens").write_text(f"ci:{'c' * 24}\n")
    args = ["serve", "--token-file", str(tmp_path / "tokens"), "--course", str(ROOT)]
    args += ["--read-timeout", "3", "--keep-alive", "2", "--connections", "9"]
    outcome = CliRunner().invoke(cli.main, args)
    assert outcome.exit_code == 0, outcome.output
    (config,) = started
    assert (config.timeout_keep_alive, config.limit_concurrency, config.http.keywords) == (
        2,
        9,
        {"read_s": 3},
    )


class Posting:
    """``uvicorn.Server``'s stand-in: sends one job to the app ``autograder serve`` built."""

    def __init__(self, config: uvicorn.Config):
        self.app = config.app

    def run(self) -> None:
        with TestClient(self.app) as c:
            c.post("/v1/grade", headers={"Authorization": f"Bearer {'c' * 24}"}, json=JOB)


@pytest.mark.parametrize(("level", "shown"), [("INFO", True), ("WARNING", False), ("warning", False)])
def test_the_log_level_option_decides_whether_jobs_and_requests_are_logged(
    monkeypatch, tmp_path, caplog, level, shown
):
    built = serve.create_app
    monkeypatch.setattr(
        serve, "create_app", lambda course, settings, tokens: built(course, settings, tokens, Canned())
    )
    monkeypatch.setattr(uvicorn, "Server", Posting)
    (tmp_path / "tokens").write_text(f"ci:{'c' * 24}\n")
    args = ["serve", "--token-file", str(tmp_path / "tokens"), "--course", str(ROOT), "--log-level", level]
    outcome = CliRunner().invoke(cli.main, args)
    assert outcome.exit_code == 0, outcome.output
    jobs = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job token=ci ")]
    assert len(jobs) == shown
    assert logging.getLogger("uvicorn.access").isEnabledFor(logging.INFO) == shown  # the access log too


def test_importing_the_service_leaves_ray_to_batch_start_ray():
    """Ray reads its authentication mode when imported; ``batch`` chooses it for the embedded
    cluster first, so an earlier import made ``autograder serve`` fail to start Ray."""
    code = "import sys, autograder.delivery.serve; print('ray' in sys.modules)"
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "False"
