"""The grader's side of the GPU service (``gpu_service``), against a fake service on loopback.

``autograder grade`` on the fake course (its ``vec`` performance item is not run: the fake
backend cannot time) asks a stand-in HTTP server (http.server in a thread). A good answer
replaces that item, in results.json and the TA report, and nothing else; every way the service
can fail (down, 500, garbage, slow, another rubric, a refusal, its own "not run") leaves the
item exactly as it was, not run, with the reason appended, and results.json valid.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from autograder import cli
from autograder.delivery import gpu_service
from autograder.grading import pipeline
from autograder.grading.evidence import Evidence, ServiceRecord
from autograder.grading.performance import PerformanceEvidence

from .fake_backend import open_fake_backends

TOKEN = "course-token-0123456789"
PERF = "vec performance (perf)"
VERDICT = {
    "name": PERF,
    "score": 0.75,
    "max_score": 1,
    "status": "failed",
    "output": "```\ntime 1.5x the reference\n```",
    "feedback": "time 1.5x the reference",
    "regrade": False,
    "not_run": None,
    # as the service's TA report records it (``Evidence.to_json``), sent as JSON
    "evidence": json.loads(
        json.dumps(Evidence(ratio=PerformanceEvidence("time", 0.75, "1.5x", 1.5)).to_json())
    ),
}
# the service grades every item; the caller must take only those not run here
OTHER = {**VERDICT, "name": "vec correctness (aligned)", "score": 0.0, "max_score": 2, "feedback": "wrong"}
GRADED = {"assignment": "vec", "status": "graded", "backend": "gpu", "items": [OTHER, VERDICT]}


class FakeService(ThreadingHTTPServer):
    """Answers every POST with ``self.reply`` = (status, body bytes, delay in s); keeps each request."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.reply = (200, json.dumps(GRADED).encode(), 0.0)
        self.requests: list[tuple[dict, dict]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((dict(self.headers), {"path": self.path, **json.loads(body)}))
        status, data, delay = self.server.reply
        time.sleep(delay)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the grader gave up waiting
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def service():
    server = FakeService()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def fake_backends(monkeypatch):
    monkeypatch.setattr(cli.shared, "open_backends", open_fake_backends)
    monkeypatch.delenv(gpu_service.URL_VARIABLE, raising=False)
    monkeypatch.delenv(gpu_service.TOKEN_VARIABLE, raising=False)


def grade(course_root, out, *extra, env=None):
    """``autograder grade`` of the fake course's reference (vec only) into ``out``; its files."""
    args = ["grade", str(course_root / "reference"), "--course", str(course_root), "--seed", "11"]
    args += ["--assignment", "vec", "--results", str(out / "results.json"), "--report", str(out / "report")]
    outcome = CliRunner().invoke(cli.main, [*args, *extra], env=env or {})
    assert outcome.exit_code == 0, outcome.output
    results = json.loads((out / "results.json").read_text())
    return outcome, results, json.loads((out / "report.json").read_text())


@pytest.fixture
def alone(course_root, tmp_path):
    """What grade writes with no service configured."""
    return grade(course_root, tmp_path / "alone")


def by_name(entries: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in entries}


def by_name_results(grade):
    return {r.item.name: r for r in grade.items}


def test_an_item_not_run_here_is_replaced_by_the_services_verdict_and_the_total_recomputed(
    course_root, tmp_path, service, alone
):
    env = {gpu_service.URL_VARIABLE: service.url, gpu_service.TOKEN_VARIABLE: TOKEN}
    outcome, results, report = grade(course_root, tmp_path / "out", env=env)
    _, local, local_report = alone
    perf = by_name(results["tests"])[PERF]
    assert perf["score"] == 0.75 and "regrade" not in perf["tags"]
    assert "time 1.5x the reference\n(graded on the GPU service, on its gpu backend)" in perf["output"]
    assert results["score"] == local["score"] + 0.75
    others = [t for t in results["tests"] if t["name"] != PERF]
    assert others == [t for t in local["tests"] if t["name"] != PERF]  # the wrong OTHER was not taken
    assert "could not be graded here" not in results["output"]
    item = by_name(report["items"])[PERF]
    assert item["score"] == 0.75 and item["not_run"] is None
    assert item["evidence"] == {**VERDICT["evidence"], "gpu_service": {"url": service.url, "backend": "gpu"}}
    assert report["score"] == local_report["score"] + 0.75
    headers, sent = service.requests[0]
    assert headers["Authorization"] == f"Bearer {TOKEN}" and sent["path"] == gpu_service.GRADE_PATH
    assert sent["assignment"] == "vec" and sent["seed"] == 11 == report["seed"]
    assert sent["source"] == (course_root / "reference/vec.cu").read_text()
    assert sent["filename"] == "vec.cu"  # the student's file's name, which the service grades under
    assert 0 < sent["deadline_s"] < gpu_service.WAIT_CAP_S
    assert any(line.endswith(PERF) and "0.75 / 1" in line for line in outcome.output.splitlines())


def test_the_courses_gpu_service_json_configures_it_and_the_environment_comes_first(
    course_root, tmp_path, service
):
    baked = {"url": "http://127.0.0.1:9", "token": TOKEN}
    (course_root / gpu_service.CONFIG_FILE).write_text(json.dumps(baked))
    assert gpu_service.configured(course_root) == gpu_service.Service("http://127.0.0.1:9", TOKEN)
    _, results, _ = grade(course_root, tmp_path / "out", env={gpu_service.URL_VARIABLE: service.url})
    assert by_name(results["tests"])[PERF]["score"] == 0.75
    assert service.requests[0][0]["Authorization"] == f"Bearer {TOKEN}"  # the token from the file


def answering(status, body, delay=0.0):
    """Arranges the fake service to answer so; returns its URL."""

    def arrange(server):
        server.reply = (status, body if isinstance(body, bytes) else json.dumps(body).encode(), delay)
        return server.url

    return arrange


def nobody_listening(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


FAILURES = {
    "down": (nobody_listening, "could not be reached: connection refused"),
    "500": (answering(500, b"Internal Server Error"), "refused it (HTTP 500)"),
    "busy": (answering(429, {"detail": "more than 120 requests a minute"}), "(HTTP 429: more than 120"),
    "garbage": (answering(200, b"<html>hello</html>"), "answered something that is not a grading"),
    "no items": (answering(200, {"status": "graded"}), "is not a grading (no list of items)"),
    "another rubric": (
        answering(200, {**GRADED, "items": [{**VERDICT, "max_score": 3}]}),
        "is worth 3 points there, 1 here",
    ),
    "score past the points": (
        answering(200, {**GRADED, "items": [{**VERDICT, "score": 7}]}),
        "scores 7 of 1",
    ),
    "slow": (answering(200, GRADED, delay=3.0), "did not answer within 1 s"),
    "its own not run": (
        answering(200, {**GRADED, "status": "not run", "reason": "did not answer within 60 s"}),
        "did not answer within 60 s",
    ),
    "evidence of another shape": (
        answering(200, {**GRADED, "items": [{**VERDICT, "evidence": {"cases": [{"group": "perf"}]}}]}),
        "has no valid 'evidence': a CaseRecord lacks 'index'",
    ),
    "an item it could not run": (
        answering(200, {**GRADED, "items": [{**VERDICT, "not_run": "needs a GPU", "score": 0}]}),
        "could not run it either (needs a GPU)",
    ),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_service_that_fails_leaves_the_item_not_run_with_the_reason_and_nothing_else_changed(
    course_root, tmp_path, service, alone, monkeypatch, failure
):
    arrange, reason = FAILURES[failure]
    url = arrange(service)
    monkeypatch.setattr(gpu_service, "wait_within", lambda remaining_s: 1.0)
    env = {gpu_service.URL_VARIABLE: url, gpu_service.TOKEN_VARIABLE: TOKEN}
    _, results, report = grade(course_root, tmp_path / "out", env=env)
    _, local, _ = alone
    perf, before = by_name(results["tests"])[PERF], by_name(local["tests"])[PERF]
    assert perf["output"].startswith(before["output"].removesuffix("```"))  # as it was, then the reason
    assert f"(the GPU service at {url.split('//')[1]} " in perf["output"] and reason in perf["output"]
    assert {**perf, "output": ""} == {**before, "output": ""}
    assert [t for t in results["tests"] if t["name"] != PERF] == [
        t for t in local["tests"] if t["name"] != PERF
    ]
    assert results["score"] == local["score"] and reason in results["output"]
    item = by_name(report["items"])[PERF]
    assert item["not_run"].startswith("needs a GPU; ") and reason in item["not_run"]
    assert item["evidence"]["gpu_service"]["error"] == item["not_run"].removeprefix("needs a GPU; ")
    text = json.dumps(results)
    assert "Traceback" not in text and str(tmp_path) not in text


def test_no_token_or_no_time_left_asks_nothing(course, backends, service):
    graded = pipeline.grade_submission(
        course.root / "reference", course, backends, seed=2, assignments=["vec"]
    )
    tokenless = gpu_service.Service(service.url, "")
    for target, wait_s, reason in (
        (tokenless, 60.0, "no token for the GPU service at"),
        (gpu_service.Service(service.url, TOKEN), 0.5, "no time was left to ask the GPU service"),
        (gpu_service.Service("file:///etc/passwd", TOKEN), 60.0, "is not http(s)://HOST[:PORT]"),
    ):
        merged = gpu_service.completed(graded, target, wait_s)
        assert reason in by_name_results(merged)[PERF].not_run
    assert service.requests == []
    assert gpu_service.completed(graded, None, 60.0) is graded


def test_the_kernel_sent_is_the_one_the_grading_read_not_the_file_on_disk_now(
    course, backends, service, tmp_path
):
    folder = tmp_path / "submission"
    shutil.copytree(course.root / "reference", folder)
    graded = pipeline.grade_submission(folder, course, backends, seed=2, assignments=["vec"])
    read = (folder / "vec.cu").read_text()
    shutil.rmtree(folder)  # gone: the grade holds what was graded
    merged = gpu_service.completed(graded, gpu_service.Service(service.url, TOKEN), 60.0)
    assert by_name_results(merged)[PERF].score == 0.75
    assert service.requests[0][1]["source"] == read and service.requests[0][1]["filename"] == "vec.cu"


def test_the_caller_can_ask_for_every_item_of_an_assignment(course, backends, service):
    graded = pipeline.grade_submission(course.root / "reference", course, backends, seed=2)
    service.reply = (200, json.dumps({**GRADED, "items": [OTHER, VERDICT]}).encode(), 0.0)

    def every_vec_item(result):
        return result.item.assignment == "vec" and result.item.name in (PERF, OTHER["name"])

    merged = by_name_results(
        gpu_service.completed(graded, gpu_service.Service(service.url, TOKEN), 60, every_vec_item)
    )
    assert merged[OTHER["name"]].score == 0.0 and merged[PERF].score == 0.75
    assert [r for r in graded.items if not every_vec_item(r)] == [
        merged[r.item.name] for r in graded.items if not every_vec_item(r)
    ]
    assert len(service.requests) == 1  # grid2d had nothing wanted: not asked


def test_token_files_name_their_tokens_and_refuse_weak_ones(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(f"# the course's tokens\n\ngradescope:{TOKEN}\n{TOKEN[::-1]}\n")
    assert gpu_service.read_tokens(path) == [
        gpu_service.Token("gradescope", TOKEN),
        gpu_service.Token("line 4", TOKEN[::-1]),
    ]
    for text, words in (
        ("ta:short\n", "tokens:1: a token is at least 16 characters"),
        ("# none\n", "holds no token"),
    ):
        path.write_text(text)
        with pytest.raises(ValueError, match=words):
            gpu_service.read_tokens(path)


CREDENTIALS = "student-visible:hunter2-password"


@pytest.mark.parametrize("where", ["environment", "gpu-service.json"])
def test_a_url_with_a_user_or_password_is_refused_and_never_shown(course_root, tmp_path, service, where):
    url = service.url.replace("//", f"//{CREDENTIALS}@")
    if where == "environment":
        env = {gpu_service.URL_VARIABLE: url, gpu_service.TOKEN_VARIABLE: TOKEN}
    else:
        (course_root / gpu_service.CONFIG_FILE).write_text(json.dumps({"url": url, "token": TOKEN}))
        env = {}
    outcome, results, report = grade(course_root, tmp_path / "out", env=env)
    assert service.requests == []
    assert "holds a user name or password" in by_name(results["tests"])[PERF]["output"]
    for text in (outcome.output, json.dumps(results), json.dumps(report)):
        assert "hunter2" not in text and "student-visible" not in text


def test_the_gradescope_zip_refuses_a_url_with_a_password(course_root, tmp_path):
    (tmp_path / "token").write_text(TOKEN)
    args = ["gradescope", "vec", "--course", str(course_root), "--out", str(tmp_path / "a.zip")]
    args += [
        "--gpu-url",
        f"https://{CREDENTIALS}@gpu.example.edu",
        "--gpu-token-file",
        str(tmp_path / "token"),
    ]
    outcome = CliRunner().invoke(cli.main, args)
    assert outcome.exit_code == 2 and "holds a user name or password" in outcome.output
    assert "hunter2" not in outcome.output and not (tmp_path / "a.zip").exists()


def test_a_verdict_names_the_service_by_scheme_host_and_port_alone(course, backends, service):
    graded = pipeline.grade_submission(
        course.root / "reference", course, backends, seed=2, assignments=["vec"]
    )
    prefixed = gpu_service.Service(service.url + "/private-prefix", TOKEN)
    merged = gpu_service.completed(graded, prefixed, 60.0)
    assert by_name_results(merged)[PERF].evidence.gpu_service == ServiceRecord(url=service.url, backend="gpu")
    assert service.requests[0][1]["path"] == "/private-prefix" + gpu_service.GRADE_PATH


@pytest.mark.parametrize(
    "url, problem",
    [
        ("https://gpu.example.edu", None),
        ("http://127.0.0.1:8000/prefix/", None),
        ("https://user:secret@gpu.example.edu", "holds a user name or password"),
        ("https://user@gpu.example.edu:8443", "holds a user name or password"),
        ("https://gpu.example.edu/?token=secret", "https://gpu.example.edu/… has a query or fragment"),
        ("https://gpu.example.edu:secret", "is not http(s)://HOST[:PORT][/PREFIX]"),
        ("file:///etc/passwd", "URL file:// is not http(s)://HOST[:PORT][/PREFIX]"),
    ],
)
def test_url_problem_names_what_is_wrong_and_no_secret(url, problem):
    said = gpu_service.url_problem(url)
    assert said == problem if problem is None else problem in said and "secret" not in said
