"""``autograder serve``: the GPU grading service that Gradescope's autograder calls (docs/gpu-service.md).

``POST /v1/grade`` with ``Authorization: Bearer TOKEN`` and ``{"assignment", "source", "seed"}``
(and optionally ``"filename"``, ``"deadline_s"``) grades that assignment as ``autograder grade``
does, on a Ray worker: the task is ``batch.grade_files``, which runs ``grade`` in a subprocess with the
rubric's limits, holding one GPU when the backend runs on one. The answer is results.json's
item entries, each with what the caller needs to merge it (its feedback before fencing, the
regrade flag, why it was not run, the TA report's evidence). ``GET /v1/health`` says the
backend and how many jobs are waiting or running.

Nothing the caller sends is trusted: a token is compared in constant time before the body is
read (401, nothing run); the body is capped (413), and so is the source, at the source policy's
limit; the fields are validated and the assignment must be the course's (422, naming the known
ones); each token has a number of jobs at once and of requests a minute (429); the kernel is
then graded by ``grade``, under the same source policy and limits as anywhere. A job past its
deadline is cancelled and its items say "not run: the GPU service did not answer within N s".
Each job is logged (``logging``, at INFO; ``autograder serve`` writes the log to stderr,
``--log-level WARNING`` leaves these lines out): token name, assignment, seed, status, seconds.
Ray places, runs and retries the tasks: there is no queue, scheduler or retry loop here.

A slow client holds nothing for long (:func:`server_config`): its request's headers must arrive
within ``read_s`` of connecting (or of the previous answer; ``ReadDeadline``), its body within
``read_s`` more (408), an idle kept-alive connection is closed after ``keep_alive_s``, and past
``connections`` connections at once uvicorn answers 503. The access log shows no query string and
no token (``Redacted``): a caller that put its token in the URL must not find it there.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import hmac
import json
import logging
import math
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, replace

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol

from autograder.course.folder import Course
from autograder.course.policy import MAX_SOURCE_BYTES
from autograder.delivery import batch
from autograder.delivery.gpu_service import Token, answer_items, graded_items
from autograder.feedback import two_decimals
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.pipeline import submitted_name
from autograder.grading.results import build_results, grader_version

# any source within the policy's limit fits, however JSON escapes it (\u0000 is 6 bytes)
MAX_REQUEST_BYTES = 6 * MAX_SOURCE_BYTES + (64 << 10)
MAX_HEADER_BYTES = 16 << 10  # a request line and headers longer than this: 400
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeSettings:
    backend: str  # gpu, emulator or auto (gpu when the Ray cluster has a GPU)
    deadline_s: float  # the longest a job waits and runs before its items say "not run"
    per_minute: int  # requests a minute, per token
    concurrent: int  # jobs at once, per token
    address: str | None = None  # a Ray cluster to join; None: an embedded one
    read_s: float = 30.0  # for a request's headers, and again for its body; then the client is dropped
    keep_alive_s: float = 5.0  # an idle connection between requests is closed after this
    connections: int = 500  # at once; past it, uvicorn answers 503


class GradeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    assignment: str
    source: str
    filename: str | None = None  # the student's file's name, for the feedback; <assignment>.cu if none
    seed: int = Field(ge=0, lt=1 << 63)
    deadline_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class RayJobs:
    """Each job a Ray task running ``batch.grade_files``, placed and retried by Ray as in
    ``autograder batch``; a job cancelled (past its deadline) cancels its task, which stops its
    ``grade`` subprocess. Ray is imported once ``batch.start_ray`` has, never before: it reads its
    authentication mode once, when imported, and ``start_ray`` chooses the embedded cluster's
    first (an ``import ray`` atop this module made ``autograder serve`` fail to start Ray)."""

    def __init__(self, address: str | None):
        self.address = address

    def start(self, course_data: dict[str, bytes], settings: batch.Settings) -> batch.Settings:
        settings = batch.start_ray(self.address, settings, batch.digest(course_data))
        self.task = batch.whole_task(settings)
        import ray

        self.ray = ray
        self.course = ray.put(course_data)
        if settings.gpus and not ray.cluster_resources().get("GPU"):
            LOG.warning("the Ray cluster has no GPU: jobs wait until one joins")
        return settings

    async def run(self, files: dict[str, bytes], seed: int, settings: batch.Settings) -> dict:
        ref = self.task.remote(self.course, files, seed, settings)
        try:
            return await asyncio.wrap_future(ref.future())
        except asyncio.CancelledError:
            self.ray.cancel(ref)
            raise
        except self.ray.exceptions.RayError as e:
            return batch.lost_task(e)

    def stop(self) -> None:
        self.ray.shutdown()


class Service:
    """The state behind the routes: tokens, limits, the jobs in flight."""

    def __init__(self, course: Course, settings: ServeSettings, tokens: list[Token], jobs):
        self.course = course
        self.settings = settings
        self.tokens = tokens
        self.jobs = jobs
        self.limiter = MovingWindowRateLimiter(MemoryStorage())
        self.rate = RateLimitItemPerMinute(settings.per_minute)
        self.slots = {t.name: asyncio.Semaphore(settings.concurrent) for t in tokens}
        self.in_flight = 0
        self.grading = batch.Settings(settings.backend, 0, (), course.rubric.limits.submission_s)

    def start(self) -> None:
        self.grading = self.jobs.start(batch.course_files(self.course), self.grading)

    async def health(self) -> dict:
        return {"status": "ok", "backend": self.grading.backend, "queue": self.in_flight}

    async def grade(self, request: Request) -> JSONResponse:
        holder = self.holder(request.headers.get("authorization", ""))
        if holder is None:
            return refused(401, "a course token is needed: Authorization: Bearer TOKEN", "-")
        if not self.limiter.hit(self.rate, holder):
            return refused(429, f"more than {self.settings.per_minute} requests a minute", holder)
        try:
            body = await asyncio.wait_for(capped_body(request, MAX_REQUEST_BYTES), self.settings.read_s)
        except asyncio.TimeoutError:
            return refused(
                408, f"the request's body did not arrive within {self.settings.read_s:g} s", holder
            )
        if body is None:
            return refused(413, f"a request is at most {MAX_REQUEST_BYTES} bytes", holder)
        try:
            job = GradeRequest.model_validate_json(body)
        except ValidationError as e:
            return refused(
                422, e.errors(include_url=False, include_input=False, include_context=False), holder
            )
        if len(job.source.encode(errors="surrogatepass")) > MAX_SOURCE_BYTES:
            return refused(413, f"a kernel is at most {MAX_SOURCE_BYTES} bytes", holder)
        if job.assignment not in self.course.rubric.assignments:
            known = list(self.course.rubric.assignments)
            return refused(422, f"unknown assignment {job.assignment!r}", holder, known=known)
        slots = self.slots[holder]
        if slots.locked():
            return refused(429, f"{self.settings.concurrent} jobs of this token are already running", holder)
        async with slots:
            return ReportResponse(await self.answer(job, holder))

    def holder(self, authorization: str) -> str | None:
        """The name of the token ``authorization`` bears; every token compared, in constant time."""
        scheme, _, given = authorization.partition(" ")
        found = None
        for token in self.tokens:
            if hmac.compare_digest(token.secret.encode(), given.strip().encode(errors="replace")):
                found = token.name
        return found if scheme.lower() == "bearer" else None

    async def answer(self, job: GradeRequest, holder: str) -> dict:
        """Grade ``job`` on a worker within its deadline; the answer, logged."""
        started = time.monotonic()
        self.in_flight += 1
        try:
            answer, why = await self.outcome(job)
        finally:
            self.in_flight -= 1
        seconds = time.monotonic() - started
        log(
            "job",
            token=holder,
            assignment=job.assignment,
            seed=job.seed,
            status=answer["status"],
            seconds=f"{seconds:.1f}",
            why=why,
        )
        return {**answer, "elapsed_s": round(seconds, 3)}

    async def outcome(self, job: GradeRequest) -> tuple[dict, str | None]:
        """The answer to ``job``, and for the log why it was not graded."""
        deadline_s = min(self.settings.deadline_s, job.deadline_s or math.inf)
        # the student's file's name, so that its compile log and findings name it as the
        # student's own grading does (pipeline.submitted_name: never a path, else <assignment>.cu)
        name = submitted_name(job.filename or "", job.assignment)
        files = {name: job.source.encode(errors="surrogatepass")}
        settings = replace(self.grading, assignments=(job.assignment,))
        try:
            done = await asyncio.wait_for(self.jobs.run(files, job.seed, settings), deadline_s)
        except asyncio.TimeoutError:
            return self.not_run(job, f"did not answer within {two_decimals(deadline_s)} s"), "deadline"
        graded = self.graded(job, done)
        if graded is None:
            return self.not_run(job, "could not grade it (its grader failed)"), done.get("reason")
        return graded, None

    def graded(self, job: GradeRequest, done: dict) -> dict | None:
        """The items ``grade`` wrote, with their details from its TA report; None when it wrote none."""
        items = graded_items(done["files"]) if done["exit"] == 0 else None
        return None if items is None else self.answered(job, "graded", items)

    def not_run(self, job: GradeRequest, reason: str) -> dict:
        """Every item of the assignment not run, because of ``reason`` (the service's own)."""
        why = f"the GPU service {reason}"
        results = [
            ItemResult(item, 0.0, f"not run: {why}", regrade=True, not_run=why)
            for item in self.course.rubric.assignments[job.assignment]
        ]
        grade = Grade(tuple(results), self.grading.backend, job.seed)
        tests = build_results(grade, self.course.rubric)["tests"]
        details = [{"output": r.output, "regrade": True, "not_run": why, "evidence": {}} for r in results]
        return {**self.answered(job, "not run", answer_items(tests, details)), "reason": reason}

    def answered(self, job: GradeRequest, status: str, items: list[dict]) -> dict:
        return {
            "assignment": job.assignment,
            "status": status,
            "backend": self.grading.backend,
            "grader_version": grader_version(),
            "items": items,
        }


async def capped_body(request: Request, limit: int) -> bytes | None:
    """The request's body; None as soon as it is known to be longer than ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


class ReportResponse(JSONResponse):
    """An answer written as the TA report's JSON is (Python's ``json``): a kernel's NaN output
    stays ``NaN``, which the grader's client reads back, instead of failing the answer."""

    def render(self, content: object) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def refused(status: int, detail, holder: str, **extra) -> JSONResponse:
    log("refused", token=holder, status=status)
    # 408: the rest of a slow body is not waited for; the connection closes with the answer
    headers = {401: {"WWW-Authenticate": "Bearer"}, 408: {"Connection": "close"}}.get(status)
    return JSONResponse({"detail": detail, **extra}, status_code=status, headers=headers)


def log(event: str, **fields) -> None:
    """One INFO record: the event and its fields as ``key=value`` (quoted where it has a space)."""
    shown = [f"{k}={v!r}" if " " in str(v) else f"{k}={v}" for k, v in fields.items() if v is not None]
    LOG.info(" ".join([event, *shown]))


def create_app(course: Course, settings: ServeSettings, tokens: list[Token], jobs=None) -> FastAPI:
    """The service's ASGI app, its jobs started (default: ``RayJobs``; a test passes a stand-in
    with the same ``start``, ``run`` and ``stop``) and stopped when the app shuts down. Ray starts
    here, before uvicorn installs its signal handlers: a SIGTERM then stops the server gracefully
    instead of Ray's handler ending the process."""
    service = Service(course, settings, tokens, jobs or RayJobs(settings.address))
    service.start()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            yield
        finally:
            service.jobs.stop()

    app = FastAPI(title="autograder GPU service", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.add_api_route("/v1/health", service.health, methods=["GET"])
    app.add_api_route("/v1/grade", service.grade, methods=["POST"])
    return app


def server_config(
    app: FastAPI, settings: ServeSettings, tokens: list[Token], host: str, port: int
) -> uvicorn.Config:
    """uvicorn's configuration for ``app``: ``settings``' timeouts and connection limit, and the
    access log without query strings or ``tokens`` (configured as this is built)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=functools.partial(ReadDeadline, read_s=settings.read_s),
        timeout_keep_alive=settings.keep_alive_s,
        limit_concurrency=settings.connections,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        log_config=log_config(tokens),
    )


class ReadDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a deadline for a request's headers: ``read_s`` from
    the connection, or from the previous answer. uvicorn has none (its keep-alive timer stops at
    the first byte), so a client sending a byte now and then would hold its connection, and one of
    ``limit_concurrency``'s places, for good. The body has its own deadline, in the app."""

    def __init__(self, *args, read_s: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_s = read_s
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.await_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.await_request()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self.awaiting_request():
            self.stop_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_deadline()
        super().connection_lost(exc)

    def awaiting_request(self) -> bool:
        """No request is being answered: the next one's headers are due (or the rest of one
        answered before its body was read)."""
        return self.cycle is None or self.cycle.response_complete

    def await_request(self) -> None:
        self.stop_deadline()
        if self.awaiting_request() and not self.transport.is_closing():
            self.deadline = self.loop.call_later(self.read_s, self.drop)

    def stop_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def drop(self) -> None:
        if not self.transport.is_closing():
            log("dropped", why=f"no request within {self.read_s:g} s")
            self.transport.close()


def log_config(tokens: Iterable[Token]) -> dict:
    """uvicorn's logging configuration, its access log passed through ``Redacted``, and its
    loggers at no level of their own: they follow the root's, which ``--log-level`` sets
    (uvicorn's default pins them at INFO)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"redacted": {"()": Redacted, "secrets": [t.secret for t in tokens]}}
    config["loggers"]["uvicorn.access"]["filters"] = ["redacted"]
    for name in UVICORN_LOGGERS:
        config["loggers"][name]["level"] = "NOTSET"
    return config


class Redacted(logging.Filter):
    """Access-log lines with no query string and no token. The service reads no query, and a
    caller that sent its token in one (refused, 401) or in the path (404) must not find it in the
    log: the texts of a line (client, method, path) lose what follows a ``?`` and every token."""

    def __init__(self, secrets: Iterable[str]):
        super().__init__()
        self.secrets = {shown for s in secrets for shown in (s, urllib.parse.quote(s, safe=""))}

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self.redacted(a) if isinstance(a, str) else a for a in record.args)
        return True

    def redacted(self, text: str) -> str:
        text = text.partition("?")[0]
        for secret in self.secrets:
            text = text.replace(secret, "[token]")
        return text
