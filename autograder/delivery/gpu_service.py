"""The GPU grading service, seen from the grader: the items not run here, graded there.

Hosted Gradescope has no GPU, so ``autograder grade`` scores every timed item "not run: needs a
GPU". When a GPU service is configured (``AUTOGRADER_GPU_URL`` and ``AUTOGRADER_GPU_TOKEN``, or
the course root's ``gpu-service.json``, which ``autograder gradescope --gpu-url`` bakes into the
zip), :func:`completed` sends the kernel of each assignment with such items, as the grading read
it (``Grade.submitted``), and the run's own secret seed, to the service (``autograder serve``,
docs/gpu-service.md), waits up to a deadline inside the submission's time limit, and puts the
service's verdicts (their evidence read back typed, ``Evidence.from_json``) in place of those items.
Whatever goes wrong (no answer, a refusal, an answer that is not a grading), the items stay
exactly as they were, not run, with the reason appended, and nothing else changes.
:func:`answered` does the same with an answer already at hand: ``autograder batch`` times a
class's kernels in GPU tasks of its own and merges their answers, shaped as the service's
(:func:`graded_items`), so that a class graded by batch gets the verdicts the service gives.

Standard library only (``urllib.request``): the base install has no HTTP client of its own.
The token file's format is read here too, for ``autograder serve`` and ``autograder gradescope``.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.course.rubric import Item
from autograder.course.submitted import Submitted
from autograder.feedback import capped, two_decimals
from autograder.grading.evidence import Evidence, ServiceRecord
from autograder.grading.grade import Grade, ItemResult

URL_VARIABLE = "AUTOGRADER_GPU_URL"
TOKEN_VARIABLE = "AUTOGRADER_GPU_TOKEN"
CONFIG_FILE = "gpu-service.json"  # in the course root; `autograder gradescope --gpu-url` writes it
GRADE_PATH = "/v1/grade"
WAIT_CAP_S = 600.0  # the longest the grader waits for the service, however much time is left
MARGIN_S = 30.0  # of the submission's time limit, kept for writing the results
MIN_WAIT_S = 1.0  # less time left than this: the service is not asked
SERVICE_SHARE = 0.9  # of the wait, the deadline the service is given: its "not run" arrives in time
MAX_ANSWER_BYTES = 16 << 20
MIN_TOKEN_CHARS = 16
_VERDICT_FIELDS = {
    "score": (int, float),
    "max_score": (int, float),
    "feedback": str,
    "regrade": bool,
    "not_run": (str, type(None)),
    "evidence": dict,
}


@dataclass(frozen=True)
class Token:
    name: str  # for the service's log
    secret: str


def read_tokens(path: Path) -> list[Token]:
    """The tokens of a token file: one a line, ``token`` or ``name:token``; ``#`` comments.

    A ValueError names the line of a token shorter than ``MIN_TOKEN_CHARS`` or holding a space,
    and a file with no token.
    """
    tokens = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, secret = line.rpartition(":")
        if len(secret) < MIN_TOKEN_CHARS or secret != "".join(secret.split()):
            raise ValueError(
                f"{path.name}:{number}: a token is at least {MIN_TOKEN_CHARS} characters with no space "
                "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))' makes one)"
            )
        tokens.append(Token(name.strip() or f"line {number}", secret))
    if not tokens:
        raise ValueError(f"{path.name} holds no token")
    return tokens


@dataclass(frozen=True)
class Grader:
    """Who graded the items not run here, as the student's feedback and the TA report name it."""

    where: str  # in a reason: "the GPU service at gpu.example.edu could not run it either"
    note: str  # after a verdict's feedback, its ``{backend}`` filled in
    url: str | None = None  # the TA report's record of it (``public_url``: never a path or token)


# ``autograder batch``'s GPU tasks: the same verdicts, said to come from a GPU of the class's grading
CLASS_GPU = Grader("the GPU grading", "graded on a GPU, on the {backend} backend")


@dataclass(frozen=True)
class Service:
    url: str  # http(s)://host[:port][/prefix]
    token: str

    @property
    def where(self) -> str:
        """The service as a student's feedback names it: its host and port, never its token."""
        return f"the GPU service at {_host_port(self.url)}"

    @property
    def grader(self) -> Grader:
        """The service as its verdicts name it (a URL that :func:`url_problem` passed)."""
        return Grader(self.where, "graded on the GPU service, on its {backend} backend", public_url(self.url))


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a GPU service's address; None when it can. The reason reaches every
    student's results.json, so it shows no more of the URL than :func:`public_url` does.

    A user name or password in the URL is refused: the URL's host is shown to students and TAs,
    and the token has its own place (a token file, ``AUTOGRADER_GPU_TOKEN``), never shown."""
    if "@" in url:
        return (
            "the GPU service's URL holds a user name or password (an @); give http(s)://HOST[:PORT] "
            f"and the token in a token file or {TOKEN_VARIABLE}"
        )
    shape = "is not http(s)://HOST[:PORT][/PREFIX]"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises ValueError here)
    except ValueError:
        return f"the GPU service's URL {shape}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"the GPU service's URL {parts.scheme}://{parts.netloc} {shape}"
    if parts.query or parts.fragment:
        return f"the GPU service's URL {public_url(url)}/… has a query or fragment: it {shape}"
    return None


def public_url(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: all of it that students and TAs are shown (a user,
    password, path or query may hold a secret)."""
    return f"{urllib.parse.urlsplit(url).scheme}://{_host_port(url)}"


def _host_port(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc.rpartition("@")[2]


def configured(course_root: Path, url: str | None = None) -> Service | None:
    """The service ``url`` (else the environment's, else the course's ``gpu-service.json``) names,
    with the environment's token, else the file's; None when nothing names one."""
    baked = _baked(course_root / CONFIG_FILE)
    url = url or os.environ.get(URL_VARIABLE) or baked.get("url")
    token = os.environ.get(TOKEN_VARIABLE) or baked.get("token") or ""
    return Service(str(url), str(token)) if url else None


def _baked(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def wait_within(remaining_s: float) -> float:
    """How long to wait for the service when ``remaining_s`` of the submission's time limit is left."""
    return min(WAIT_CAP_S, remaining_s - MARGIN_S)


def needs_service(result: ItemResult) -> bool:
    """An item that could not run here (no GPU): the service is asked for it."""
    return result.not_run is not None


def completed(
    grade: Grade,
    service: Service | None,
    wait_s: float,
    wanted: Callable[[ItemResult], bool] = needs_service,
    progress: Callable[[ItemResult], None] | None = None,
) -> Grade:
    """``grade`` with its ``wanted`` items graded by ``service``, or, where it could not, not run
    with the reason appended. Every assignment is asked at once; none waits past ``wait_s``."""
    names = _asked(grade, wanted)
    if service is None or not names:
        return grade
    started = time.monotonic()
    sources = {s.assignment: s for s in grade.submitted}

    def ask(name: str):
        return _outcome(service, name, sources.get(name), grade.seed, wait_s, _wanted(grade, wanted, name))

    with ThreadPoolExecutor(max_workers=len(names)) as pool:  # each waits at most wait_s
        outcomes = dict(zip(names, pool.map(ask, names), strict=True))
    return _with_outcomes(grade, outcomes, wanted, progress, time.monotonic() - started)


def answered(
    grade: Grade,
    answer: bytes,
    grader: Grader,
    wanted: Callable[[ItemResult], bool] = needs_service,
    progress: Callable[[ItemResult], None] | None = None,
) -> Grade:
    """``grade`` with its ``wanted`` items graded by ``answer``, a GPU grading's answer at hand,
    shaped as the service's (every assignment's items in one), checked and merged as
    :func:`completed` merges the service's; where it did not grade them, not run with the reason."""
    outcomes = {name: _read(answer, _wanted(grade, wanted, name), grader) for name in _asked(grade, wanted)}
    return _with_outcomes(grade, outcomes, wanted, progress, 0.0)


def _asked(grade: Grade, wanted: Callable[[ItemResult], bool]) -> list[str]:
    """The assignments with a ``wanted`` item, in the grade's order."""
    return list(dict.fromkeys(r.item.assignment for r in grade.items if wanted(r)))


def _wanted(grade: Grade, wanted: Callable[[ItemResult], bool], assignment: str) -> list[Item]:
    return [r.item for r in grade.items if wanted(r) and r.item.assignment == assignment]


def _with_outcomes(
    grade: Grade,
    outcomes: dict[str, Answered | str],
    wanted: Callable[[ItemResult], bool],
    progress: Callable[[ItemResult], None] | None,
    spent_s: float,
) -> Grade:
    """``grade`` with each ``wanted`` item merged from its assignment's outcome; nothing else changed."""
    items = []
    for result in grade.items:
        merged = _merged(result, outcomes[result.item.assignment]) if wanted(result) else result
        if progress and merged is not result and merged.not_run is None:  # graded there
            progress(merged)
        items.append(merged)
    return replace(grade, items=tuple(items), elapsed_s=grade.elapsed_s + spent_s)


def _outcome(
    service: Service,
    assignment: str,
    source: Submitted | None,
    seed: int,
    wait_s: float,
    items: list[Item],
) -> Answered | str:
    """The service's verdict on each of ``items``; or why there is none. The kernel is sent as
    the grading read it, under its file's name, so that the service's feedback names the
    student's file."""
    problem = url_problem(service.url)
    if problem:
        return problem
    if not service.token:
        return f"no token for {service.where} is configured"
    if source is None or source.problem is not None or source.name is None:
        return "the grade holds no kernel of it to send"
    if wait_s < MIN_WAIT_S:
        return f"no time was left to ask {service.where}"
    request = {
        "assignment": assignment,
        "filename": source.name,
        "source": source.text,
        "seed": seed,
        "deadline_s": SERVICE_SHARE * wait_s,
    }
    try:
        return _verdicts(_post(service, request, wait_s), items, service.grader)
    except (OSError, ValueError, RecursionError, http.client.HTTPException) as e:  # never a lost grade
        return _why(e, service.where, wait_s)


def _read(data: bytes, items: list[Item], grader: Grader) -> Answered | str:
    """An answer at hand's verdict on each of ``items``; or why there is none."""
    try:
        return _verdicts(data, items, grader)
    except (ValueError, RecursionError) as e:
        return _why(e, grader.where, 0.0)


def _post(service: Service, request: dict, wait_s: float) -> bytes:
    """POST ``request`` to the service; its answer's bytes (an HTTPError for any status but 200)."""
    sent = urllib.request.Request(
        service.url.rstrip("/") + GRADE_PATH,
        data=json.dumps(request, ensure_ascii=False).encode(),
        headers={"Authorization": f"Bearer {service.token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(sent, timeout=wait_s) as answer:  # the URL is http(s): url_problem
        data = answer.read(MAX_ANSWER_BYTES + 1)
    if len(data) > MAX_ANSWER_BYTES:
        raise ValueError(f"more than {MAX_ANSWER_BYTES} bytes")
    return data


@dataclass(frozen=True)
class Verdict:
    """The service's word on one item, checked against our rubric (:func:`_checked`)."""

    score: float
    feedback: str  # before fencing
    regrade: bool
    not_run: str | None  # why the service could not run it either
    evidence: Evidence  # its TA report's, read back (``Evidence.from_json``)


@dataclass(frozen=True)
class Answered:
    """An answer that graded: who graded, on which backend, and the verdict on each item asked."""

    grader: Grader
    backend: str
    verdicts: dict[str, Verdict]


def graded_items(files: dict[str, bytes]) -> list[dict] | None:
    """The items of a ``grade`` run as an answer carries them: results.json's test entries, each
    with its TA report's feedback before fencing, regrade flag, why it was not run and evidence;
    None when the run wrote no readable results.json and report.json."""
    try:
        tests = json.loads(files["results.json"])["tests"]
        details = json.loads(files["report.json"])["items"]
    except (KeyError, TypeError, ValueError):
        return None
    return answer_items(tests, details)


def answer_items(tests: list[dict], details: list[dict]) -> list[dict]:
    """Each test entry with what a caller needs to merge it, from its TA report's item."""
    return [
        {
            **test,
            "feedback": detail["output"],
            "regrade": detail["regrade"],
            "not_run": detail.get("not_run"),
            "evidence": detail["evidence"],
        }
        for test, detail in zip(tests, details, strict=True)
    ]


def _verdicts(data: bytes, items: list[Item], grader: Grader) -> Answered | str:
    """The answer's verdict per item, each checked against our rubric; or, when the grader
    answered that it did not grade, why. A ValueError says what is wrong with it."""
    answer = json.loads(data)
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise ValueError("no list of items")
    if answer.get("status") != "graded":
        return f"{grader.where} {capped(str(answer.get('reason') or 'did not grade it'), 300)}"
    given = {v.get("name"): v for v in answer["items"] if isinstance(v, dict)}
    verdicts = {item.name: _checked(given.get(item.name), item) for item in items}
    return Answered(grader, str(answer.get("backend") or "unnamed"), verdicts)


def _checked(verdict: dict | None, item: Item) -> Verdict:
    """``verdict`` as a :class:`Verdict`; a ValueError says what is wrong with it."""
    if verdict is None:
        raise ValueError(f"no item {item.name!r}")
    for key, kind in _VERDICT_FIELDS.items():
        if not isinstance(verdict.get(key), kind):
            raise ValueError(f"{item.name!r} has no valid {key!r}")
    there, points = two_decimals(verdict["max_score"]), two_decimals(item.points)
    if verdict["max_score"] != item.points:
        raise ValueError(f"{item.name!r} is worth {there} points there, {points} here")
    if not (math.isfinite(verdict["score"]) and 0 <= verdict["score"] <= item.points):
        raise ValueError(f"{item.name!r} scores {verdict['score']:g} of {points}")
    try:
        evidence = Evidence.from_json(verdict["evidence"])
    except ValueError as e:
        raise ValueError(f"{item.name!r} has no valid 'evidence': {e}") from e
    fields = (float(verdict["score"]), verdict["feedback"], verdict["regrade"], verdict["not_run"])
    return Verdict(*fields, evidence)


def _why(error: Exception, where: str, wait_s: float) -> str:
    """What went wrong, in a sentence for the student's feedback (no traceback, no path)."""
    if isinstance(error, urllib.error.HTTPError):
        return f"{where} refused it (HTTP {error.code}{_detail(error)})"
    cause = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(cause, TimeoutError):
        return f"{where} did not answer within {two_decimals(wait_s)} s"
    if isinstance(error, ValueError | RecursionError):
        return f"{where} answered something that is not a grading ({capped(str(error), 300)})"
    if isinstance(cause, OSError):
        return f"{where} could not be reached: {str(cause.strerror or cause).lower()}"
    return f"{where} broke off its answer ({type(error).__name__})"


def _detail(error: urllib.error.HTTPError) -> str:
    """``: DETAIL`` from a refusal's JSON body ``{"detail": "..."}``; nothing otherwise."""
    try:
        detail = json.loads(error.read(4096)).get("detail")
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        return ""
    return f": {capped(detail, 300)}" if isinstance(detail, str) else ""


def _merged(result: ItemResult, outcome: Answered | str) -> ItemResult:
    """``result`` as the grader graded it; or, where it could not, with the reason appended."""
    if isinstance(outcome, str):
        return _with_reason(result, outcome)
    grader, backend = outcome.grader, outcome.backend
    verdict = outcome.verdicts[result.item.name]
    if verdict.not_run:
        return _with_reason(result, f"{grader.where} could not run it either ({verdict.not_run})")
    graded_there = ServiceRecord(url=grader.url, backend=backend)
    return ItemResult(
        result.item,
        verdict.score,
        f"{verdict.feedback}\n({grader.note.format(backend=backend)})",
        replace(verdict.evidence, gpu_service=graded_there),
        regrade=verdict.regrade,
    )


def _with_reason(result: ItemResult, reason: str) -> ItemResult:
    """An item not run here stays so, saying why the service did not grade it; one graded here stays."""
    if result.not_run is None:
        return result
    return replace(
        result,
        output=f"{result.output}\n({reason})",
        not_run=f"{result.not_run}; {reason}",
        evidence=replace(result.evidence, gpu_service=ServiceRecord(error=reason)),
    )
