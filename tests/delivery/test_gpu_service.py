"""The GPU service end to end on loopback: ``autograder serve`` in a subprocess (uvicorn, an
embedded Ray cluster of this machine's cores), its emulator backend standing in for the GPU.

The emulator cannot time, so the service says "not run" for the performance item as the
grader does here; the protocol is proven on the items it grades: a round trip for every item
of vector_add equals what ``autograder grade`` writes alone with the same seed, and a caller
asking for all of them gets each replaced by the service's verdict. ``grade`` (and Gradescope's
``run_autograder``, with the zip's ``gpu-service.json``) asks for the items it could not run and
completes whatever the service does: wrong token 401, oversize 413, past the deadline "not run"
(its task cancelled), down "could not be reached". Then 100 submissions at once: all answered,
none lost, the p95 latency printed (``python3 -m pytest -s tests/delivery/test_gpu_service.py``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.backends.registry import open_backends
from autograder.course.folder import read_course
from autograder.course.policy import MAX_SOURCE_BYTES
from autograder.delivery import gpu_service
from autograder.grading import pipeline

pytest.importorskip("uvicorn", reason="the serve extra is not installed: pip install -e '.[serve]'")

ROOT = Path(__file__).resolve().parents[2]
SOURCE = (ROOT / "reference/vector_add.cu").read_text()
PERF = "vector_add performance (perf)"
TOKEN = secrets.token_urlsafe(24)
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")},
    "RAY_USAGE_STATS_ENABLED": "0",
}
# Requests at once, many more than the cores (2 in CI): every one answered, none lost, in time.
# 24 here; SERVICE_LOAD=100 runs the hundred at once that bounded it before (240 s on 2 cores).
CONCURRENT = int(os.environ.get("SERVICE_LOAD", "24"))
CONCURRENT_LIMIT_S = max(120, 2.4 * CONCURRENT)
# runs 4 billion iterations per thread: the emulator stops it by its work budget after seconds
SPINNING = """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (unsigned k = 1; k != 0; k++) sum += a[i] * b[i];
        c[i] = sum;
    }
}
"""


@dataclass
class Server:
    url: str
    log: Path
    pid: int  # the service's process: its gradings are its descendants

    def jobs(self) -> list[str]:
        """The service's job lines, without their logging prefix (time, level, logger)."""
        lines = [
            line.partition(" autograder.delivery.serve: ")[2] for line in self.log.read_text().splitlines()
        ]
        return [line for line in lines if line.startswith("job ")]


def untimed(value):
    """``value`` (JSON) without the figures that change from run to run."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in ("wall_s", "elapsed_ms")}
    return [untimed(v) for v in value] if isinstance(value, list) else value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, token: str = TOKEN, timeout: float = 300) -> tuple[int, dict]:
    request = urllib.request.Request(
        url + gpu_service.GRADE_PATH,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def health(url: str) -> dict:
    with urllib.request.urlopen(url + "/v1/health", timeout=5) as answer:
        return json.loads(answer.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("serve")
    (work / "tokens").write_text(f"# CI's token\nci:{TOKEN}\n")
    port, log = free_port(), work / "serve.log"
    command = [sys.executable, "-m", "autograder", "serve", "--course", str(ROOT), "--backend", "emulator"]
    command += ["--port", str(port), "--token-file", str(work / "tokens"), "--per-minute", "1000"]
    command += ["--concurrent", str(CONCURRENT)]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=ENV)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            try:
                health(url)
                break
            except OSError:
                time.sleep(0.5)
        assert process.poll() is None, log.read_text()
        yield Server(url, log, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def grade(submission: Path, out: Path, *extra: str, env: dict | None = None) -> dict:
    command = [sys.executable, "-m", "autograder", "grade", str(submission), "--course", str(ROOT)]
    command += ["--backend", "emulator", "--assignment", "vector_add", "--seed", "7"]
    command += ["--results", str(out / "results.json"), "--report", str(out / "report"), *extra]
    subprocess.run(command, capture_output=True, timeout=300, check=True, env=env or ENV)
    return json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """What grade writes for the reference with seed 7, no service."""
    return grade(ROOT / "reference", tmp_path_factory.mktemp("alone"))


def test_health_says_the_backend_and_the_queue(server):
    assert health(server.url) == {"status": "ok", "backend": "emulator", "queue": 0}


def test_a_round_trip_answers_every_item_as_grade_writes_it_alone(server, alone):
    status, answer = post(server.url, {"assignment": "vector_add", "source": SOURCE, "seed": 7})
    assert status == 200 and answer["status"] == "graded", answer
    assert [{k: v for k, v in i.items() if k in alone["tests"][0]} for i in answer["items"]] == alone["tests"]
    assert any(
        line.startswith("job token=ci assignment=vector_add seed=7 status=graded") for line in server.jobs()
    )


def test_a_caller_asking_for_every_item_gets_the_services_verdicts(server):
    course = read_course(ROOT)
    with open_backends(
        "emulator", course.rubric.limits.compile_s, course.rubric.limits.emulator_mb
    ) as backends:
        graded = pipeline.grade_submission(ROOT / "reference", course, backends, 7, ["vector_add"])
    service = gpu_service.Service(server.url, TOKEN)
    merged = gpu_service.completed(graded, service, 120, wanted=lambda r: True)
    for before, after in zip(graded.items, merged.items, strict=True):
        if before.not_run:
            assert after.not_run.endswith("could not run it either (needs a GPU)")
        else:
            assert after.score == before.score and after.evidence.gpu_service.backend == "emulator"
            # the service's TA report read back: the same evidence as here, but for the times
            assert untimed(after.evidence.to_json()) == {
                **untimed(before.evidence.to_json()),
                "gpu_service": {"url": server.url, "backend": "emulator"},
            }
            assert after.output == f"{before.output}\n(graded on the GPU service, on its emulator backend)"


def test_grade_asks_for_the_item_it_could_not_run_and_changes_nothing_else(server, alone, tmp_path):
    env = {**ENV, gpu_service.TOKEN_VARIABLE: TOKEN}
    results = grade(ROOT / "reference", tmp_path, "--gpu-url", server.url, env=env)
    where = f"the GPU service at {server.url.split('//')[1]}"
    others = [t for t in results["tests"] if t["name"] != PERF]
    assert others == [t for t in alone["tests"] if t["name"] != PERF] and results["score"] == alone["score"]
    perf = next(t for t in results["tests"] if t["name"] == PERF)
    assert f"({where} could not run it either (needs a GPU))" in perf["output"]


@pytest.mark.parametrize(
    "token", ["", "not-the-course-token-at-all", TOKEN[:-1]], ids=["none", "another", "one-character-short"]
)
def test_a_wrong_or_missing_token_is_401_and_nothing_runs(server, token):
    jobs = len(server.jobs())
    status, answer = post(server.url, {"assignment": "vector_add", "source": SOURCE, "seed": 1}, token)
    assert status == 401 and answer["detail"].startswith("a course token is needed")
    assert len(server.jobs()) == jobs and health(server.url)["queue"] == 0


def test_a_token_in_the_query_string_is_refused_and_kept_out_of_the_log(server):
    target = f"{server.url}{gpu_service.GRADE_PATH}?token={TOKEN}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(target, data=b"{}", method="POST"), timeout=10)
    assert refused.value.code == 401
    deadline = time.monotonic() + 5
    while f'"POST {gpu_service.GRADE_PATH} HTTP/1.1" 401' not in server.log.read_text():
        assert time.monotonic() < deadline, server.log.read_text()
        time.sleep(0.1)
    assert TOKEN not in server.log.read_text()


def test_an_oversize_kernel_is_413(server):
    body = {"assignment": "vector_add", "source": "x" * (MAX_SOURCE_BYTES + 1), "seed": 1}
    assert post(server.url, body)[0] == 413


def grading_processes(root: int) -> list[int]:
    """``autograder grade`` processes that a grading task of the service ``root`` started (their
    scratch folder says so): its descendants only, not another test's on another worker."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])  # the field after the name

    def descends(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == root:
                return True
        return False

    return [
        pid
        for pid, command in commands.items()
        if b"grade" in command and b"autograder-batch-" in command and descends(pid)
    ]


def test_a_job_past_its_deadline_says_not_run_and_its_grading_is_stopped(server):
    # How long the spinning kernel's grading runs when left alone, on this machine under its
    # load now (about 7 s alone, twice that beside another test worker): the job stopped at
    # its deadline must be gone well before its grading could have ended by itself.
    started = time.monotonic()
    status, answer = post(server.url, {"assignment": "vector_add", "source": SPINNING, "seed": 2})
    left_alone_s = time.monotonic() - started
    assert status == 200 and answer["status"] == "graded", answer  # its outputs are NaN: still an answer
    body = {"assignment": "vector_add", "source": SPINNING, "seed": 1, "deadline_s": 1.0}
    started = time.monotonic()
    status, answer = post(server.url, body)
    assert status == 200 and answer["status"] == "not run"
    assert {i["output"] for i in answer["items"]} == {
        "```\nnot run: the GPU service did not answer within 1 s\n```"
    }
    answered_s = time.monotonic() - started
    window_s = max(4.0, 0.6 * left_alone_s)  # before it would end by itself
    assert answered_s + window_s < left_alone_s, "the spinning kernel ends too soon to tell"
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) == 1:
        # Beside another test worker a cancelled grading took longer than this to go (CI, 2 cores,
        # docs/known-gaps.md); alone, it is gone in time, and not without the cancel.
        deadline = time.monotonic() + window_s
        while grading_processes(server.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in grading_processes(server.pid)]
        assert not left, f"still grading {time.monotonic() - started:.1f} s in: {left}"
    assert health(server.url)["queue"] == 0


@pytest.mark.parametrize("service", ["down", "up"])
def test_run_autograder_with_the_zips_service_completes_with_valid_results(server, tmp_path, service):
    url = server.url if service == "up" else f"http://127.0.0.1:{free_port()}"
    (tmp_path / "token").write_text(TOKEN + "\n")
    command = [sys.executable, "-m", "autograder", "gradescope", "vector_add", "--course", str(ROOT)]
    command += [
        "--out",
        str(tmp_path / "autograder.zip"),
        "--gpu-url",
        url,
        "--gpu-token-file",
        str(tmp_path / "token"),
    ]
    subprocess.run(command, capture_output=True, timeout=300, check=True, env=ENV)
    root = tmp_path / "ag"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        archive.extractall(root / "source")
    (root / "submission").mkdir()
    shutil.copy(ROOT / "reference/vector_add.cu", root / "submission")
    env = {**ENV, "AUTOGRADER_ROOT": str(root), "PATH": f"{Path(sys.executable).parent}:{ENV['PATH']}"}
    run = subprocess.run(
        ["bash", str(root / "source/run_autograder")], capture_output=True, text=True, timeout=300, env=env
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((root / "results/results.json").read_text())
    assert results["score"] == 12 and len(results["tests"]) == 5
    perf = next(t for t in results["tests"] if t["name"] == PERF)
    where = f"the GPU service at {url.split('//')[1]}"
    reason = "could not be reached: connection refused" if service == "down" else "could not run it either"
    assert f"{where} {reason}" in perf["output"] and perf["score"] == 0


def test_many_submissions_at_once_are_all_answered(server):
    def submit(seed: int) -> tuple[int, dict, float]:
        started = time.monotonic()
        status, answer = post(
            server.url, {"assignment": "vector_add", "source": SOURCE, "seed": seed}, timeout=600
        )
        return status, answer, time.monotonic() - started

    seeds = range(1000, 1000 + CONCURRENT)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
        answers = list(pool.map(submit, seeds))
    wall_s = time.monotonic() - started
    latencies = sorted(latency for _, _, latency in answers)
    p95 = statistics.quantiles(latencies, n=20)[18]
    print(
        f"\n{CONCURRENT} submissions at once on {os.cpu_count()} cores: all answered in {wall_s:.0f} s; "
        f"latency p50 {statistics.median(latencies):.1f} s, p95 {p95:.1f} s, max {latencies[-1]:.1f} s"
    )
    assert [status for status, _, _ in answers] == [200] * CONCURRENT
    assert all(a["status"] == "graded" and len(a["items"]) == 5 for _, a, _ in answers)
    assert all(a["items"][0]["score"] == 4 for _, a, _ in answers)
    logged = {int(word[5:]) for line in server.jobs() for word in line.split() if word.startswith("seed=")}
    assert set(seeds) <= logged  # every one was graded, none lost
    assert wall_s < CONCURRENT_LIMIT_S
    assert health(server.url)["queue"] == 0
