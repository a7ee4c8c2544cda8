"""``autograder batch``: a whole class graded on Ray, each submission exactly as ``autograder grade``.

SOURCE is a Gradescope "Export Submissions" zip or folder (``submission_metadata.yml`` names
each submission folder's submitters) or a plain folder of submission folders, read by
``autograder.delivery.export``: an entry whose name is not one plain folder name is refused, a zip is
unpacked within limits, and only the files ``grade`` reads are taken. Each submission
is one Ray task: the task writes the course and the submission's files into a scratch folder
on whichever machine runs it, runs ``autograder grade`` there as a subprocess (so a crash, a
hang or a memory blow-up of one submission stays in its process, and the verdict is the one
command's), and returns the files ``grade`` wrote. Nothing but the installed package has to
be on a worker: no shared file system.

Ray does the distribution (``docs/batch.md``): ``ray.init()`` starts an embedded cluster sized
to this machine, ``--address`` joins a real one. Emulator grading is one task asking for one
CPU. On a GPU a submission is two tasks (:class:`Tasks`), so that the GPU waits for no compile
or emulator check: a GPU task (:func:`time_files`, a share of a GPU: ``tasks_per_gpu`` of them
share it through ``gpu_lock``: a timing has it alone, launches run side by side) grades its timed items
alone (``grade --timed-only``), and a CPU task (:func:`grade_files`) then grades it on the
emulator as Gradescope does and takes the timed items from the GPU task's answer as Gradescope
takes a GPU service's (``grade --gpu-answer``, ``gpu_service.answered``); the TA report records
when the GPU part ran and how long it held the GPU. A task whose worker or node dies is retried
by Ray (``MAX_RETRIES``); a submission that still fails, or that ``grade`` itself could not
grade, gets the fallback ``results.json`` (every item 0 with the reason) and is listed as
failed.

``DIR/<submission>/`` holds ``results.json``, ``report.json``, ``report.md``, ``grade.log``
(what ``grade`` printed, for the instructor), ``source/`` (the files it graded, for the class
report, whatever SOURCE was) and ``key``: the digest of everything the verdict
depends on (the submission's files, the course's files, the grader's version, the seed, the
backend and the assignments). A re-run skips a submission whose key is unchanged, so it
regrades only what changed, and Ray starts only when something must be graded; ``--only``
regrades named students whatever their key. The class's
seed is drawn once and kept in ``DIR/class.json``; each submission's seed derives from it and
from the submission's name, so a re-run draws the same inputs. ``DIR/scores.csv`` is in the
shape Gradescope's score upload reads and ``DIR/regrades.csv`` lists every item flagged for a TA.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autograder.backends.registry import CLASSES, holds_a_gpu, resolve_where, select_backend
from autograder.contract import BackendError
from autograder.course.folder import Course
from autograder.course.submitted import kernels
from autograder.delivery import gpu_service, packaging
from autograder.delivery.export import BatchError as BatchError
from autograder.delivery.export import Submission, Submitter, read_limit, submission_files
from autograder.delivery.export import read_class as read_class
from autograder.feedback import text_cell
from autograder.grading import ledger
from autograder.grading.results import fallback_results, grader_version

CLASS_FILE = "class.json"
SOURCE = "source"  # DIR/<submission>/source/: the files its grading read
MAX_RETRIES = 3  # Ray retries a task whose worker or node died; never a grading failure

# What happens behind the progress bar (Ray, the plan, what failed and why) for whoever runs the
# class; the bar and the summary are the CLI's (``cli/whole_class.py``), printed.
LOG = logging.getLogger(__name__)
GRADE_MARGIN_S = 120  # past the rubric's submission limit, a grade subprocess is stopped
STOP_S = 10  # how long a stopped grade may take to close its backends before it is killed
OUTPUTS = ("results.json", "report.json", "report.md", "grade.log")
TASK_UNSET = ("AUTOGRADER_COURSE", "AUTOGRADER_GPU_URL", "AUTOGRADER_GPU_TOKEN")  # left out of a task's grade
CPU_BACKEND = "emulator"  # what a CPU task grades on beside a GPU task: Gradescope's own grading
GPU_ANSWER = "gpu-answer.json"  # in a CPU task's scratch folder: its GPU task's answer
# GPU tasks sharing a GPU: on the H200, 3 graded 103 whole submissions per GPU-hour where 1
# graded 63, the reference copies' timed ratios as steady (bench/results/batch-gpu.md)
TASKS_PER_GPU = 3


@dataclass
class Outcome:
    """One submission after the batch: graded, failed (with why), skipped as current, or refused."""

    submission: Submission
    status: str  # "graded", "failed", "current" or "refused" (export.name_problem)
    reason: str | None = None
    elapsed_s: float = 0.0
    gpu_s: float | None = None  # how long its GPU task ran, its turns on a shared GPU too (None: it had none)


@dataclass(frozen=True)
class Settings:
    """What every submission's grading shares."""

    backend: str  # auto (gpu when the cluster has a GPU), gpu or emulator
    seed: int
    assignments: tuple[str, ...] = ()
    limit_s: float = 900.0
    course_key: str = field(default="", compare=False)
    tasks_per_gpu: int = TASKS_PER_GPU  # GPU tasks sharing one GPU, a timing alone on it (``gpu_lock``)

    @property
    def gpus(self) -> int:
        """GPUs a grading holds: one when grading on a GPU. In a batch, only its GPU task holds a
        GPU, and ``tasks_per_gpu`` of them share it (:class:`Tasks`)."""
        return 1 if holds_a_gpu(self.backend) else 0

    @property
    def gpu_share(self) -> float:
        """What a task that runs kernels asks Ray for: its share of a GPU, ``tasks_per_gpu`` of
        them on each (``gpu_lock``: a timing alone, launches side by side); none off a GPU."""
        return self.gpus / self.tasks_per_gpu


# --- what a task needs ------------------------------------------------------------------


def course_files(course: Course) -> dict[str, bytes]:
    """The course as ``grade`` reads it: specs and handouts, rubric, references, starters."""
    entries = {"rubric.yaml": (course.rubric.path, 0o644)}
    for folder in ("assignments", "reference", "starter"):
        entries |= packaging.tree(course.root / folder, folder)
    return {name: content for name, (content, _mode) in packaging.read(entries).items()}


def digest(files: dict[str, bytes], *extra: object) -> str:
    """A digest of named files and a few values, independent of the files' order."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{len(files[name])}\0".encode())
        h.update(files[name])
    h.update(json.dumps([str(e) for e in extra]).encode())
    return h.hexdigest()


def submission_seed(seed: int, submission: Submission) -> int:
    """Each submission's secret seed, from the class's and its name: the same on every re-run."""
    data = hashlib.sha256(f"{seed}/{submission.id}".encode()).digest()
    return int.from_bytes(data[:8], "little") >> 1  # 63 bits, as ``grade`` draws them


def submission_key(files: dict[str, bytes], submission: Submission, settings: Settings) -> str:
    return digest(
        files,
        settings.course_key,
        grader_version(),
        submission_seed(settings.seed, submission),
        settings.backend,
        sorted(settings.assignments),
        *(["timed items in GPU tasks"] if settings.gpus else []),  # graded otherwise before
    )


# --- the task -----------------------------------------------------------------------------


def _graded(
    command: list[str], cwd: Path, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess:
    """``autograder grade`` run to its end. Stopped (its time past, or its task cancelled) by
    SIGTERM first, which ``grade`` answers by closing its backends: their workers run in sessions
    of their own, and a SIGKILL of ``grade`` alone would leave one emulating on."""
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except BaseException as stopped:
            process.terminate()
            try:
                stdout, stderr = process.communicate(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
            if isinstance(stopped, subprocess.TimeoutExpired):
                stopped.stdout, stopped.stderr = stdout, stderr
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def grade_files(
    course: dict[str, bytes],
    files: dict[str, bytes],
    seed: int,
    settings: Settings,
    timed: dict | None = None,
) -> dict:
    """The Ray task: grade one submission with ``autograder grade`` in a scratch folder.

    With ``timed``, what its GPU task (:func:`time_files`) answered: the CPU task of a GPU class,
    which grades on the emulator and takes the timed items from that answer as Gradescope takes a
    GPU service's (``grade --gpu-answer``), and records the GPU part (:func:`with_gpu_part`).

    Returns ``{"exit": status or None, "reason": why it failed or None, "files": {name: bytes},
    "elapsed_s": seconds}``, and with ``timed`` its ``"gpu"`` record.
    """
    if timed is None:
        return _grade_in_scratch(course, files, seed, settings, settings.backend)
    answer = json.dumps(timed_answer(timed, settings.backend)).encode()
    done = _grade_in_scratch(
        course, files, seed, settings, CPU_BACKEND, ["--gpu-answer", GPU_ANSWER], {GPU_ANSWER: answer}
    )
    return with_gpu_part(done, timed)


def time_files(course: dict[str, bytes], files: dict[str, bytes], seed: int, settings: Settings) -> dict:
    """The GPU task: the submission's timed items alone (``grade --timed-only``) on the class's
    backend, the same seed as its CPU task; :func:`grade_files`' answer, with ``"gpu"``: when it
    ran and how long it held the GPU."""
    ran_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    done = _grade_in_scratch(course, files, seed, settings, settings.backend, ["--timed-only"])
    held = {"ran_at": ran_at, "busy_s": round(done["elapsed_s"], 3), "share": 1 / settings.tasks_per_gpu}
    return {**done, "gpu": held}


def timed_answer(timed: dict, backend: str) -> dict:
    """A GPU task's answer as the GPU service answers (``gpu_service.graded_items``); "not run"
    where its grading failed (the instructor finds why in grade.log, the student a plain reason)."""
    items = gpu_service.graded_items(timed["files"]) if timed["exit"] == 0 else None
    if items is None:
        return {"status": "not run", "reason": "could not grade it (its grader failed)", "items": []}
    return {"status": "graded", "backend": backend, "items": items}


def with_gpu_part(done: dict, timed: dict) -> dict:
    """A CPU task's answer with its GPU task's part recorded for the TA: in report.json (``gpu``:
    when it ran, how long it held the GPU, whether it graded) and report.md, its log after
    grade.log's."""
    gpu = {**timed["gpu"], "status": "graded" if timed["exit"] == 0 else "failed", "reason": timed["reason"]}
    files = dict(done["files"])
    if "report.json" in files:
        report = json.loads(files["report.json"])
        files["report.json"] = (json.dumps({**report, "gpu": gpu}, indent=2, default=str) + "\n").encode()
    if "report.md" in files:
        shared = "" if gpu.get("share", 1) == 1 else f", a 1/{round(1 / gpu['share'])} share, timing alone"
        held = f"{gpu['ran_at']}, holding it {gpu['busy_s']:.1f} s{shared} ({gpu['status']})"
        files["report.md"] += f"\nThe timed items ran on a GPU at {held}.\n".encode()
    log = timed["files"].get("grade.log", b"")
    files["grade.log"] = files.get("grade.log", b"") + b"\n--- the GPU task (grade --timed-only) ---\n" + log
    return {**done, "files": files, "gpu": gpu}


def _grade_in_scratch(
    course: dict[str, bytes],
    files: dict[str, bytes],
    seed: int,
    settings: Settings,
    backend: str,
    extra: list[str] | None = None,
    extra_files: dict[str, bytes] | None = None,
) -> dict:
    """``autograder grade`` of ``files`` on ``backend`` in a scratch folder (``extra``: more of its
    options, naming ``extra_files`` written beside it); :func:`grade_files`' answer."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autograder-batch-") as scratch:
        root = Path(scratch)
        _write_tree(root / "course", course)
        _write_tree(root / "submission", files)
        _write_tree(root, extra_files or {})
        (root / "out").mkdir()
        command = [sys.executable, "-m", "autograder", "grade", str(root / "submission")]
        command += ["--course", str(root / "course"), "--backend", backend, "--seed", str(seed)]
        command += ["--results", str(root / "out/results.json"), "--report", str(root / "out/report")]
        command += [arg for name in settings.assignments for arg in ("--assignment", name)]
        command += extra or []  # run in ``root``: ``extra`` names ``extra_files`` by their names alone
        # the course is the one written here, and a GPU service is never asked from inside a task
        env = {k: v for k, v in os.environ.items() if k not in TASK_UNSET}
        try:
            run = _graded(command, root, env, settings.limit_s + GRADE_MARGIN_S)
        except subprocess.TimeoutExpired as e:
            log = (e.stdout or b"") + (e.stderr or b"")
            reason = f"the grader ran past {settings.limit_s + GRADE_MARGIN_S:g} s and was stopped"
            return {
                "exit": None,
                "reason": reason,
                "files": {"grade.log": log},
                "elapsed_s": time.monotonic() - started,
            }
        (root / "out/grade.log").write_bytes(run.stdout + run.stderr)
        outputs = {
            name: (root / "out" / name).read_bytes() for name in OUTPUTS if (root / "out" / name).exists()
        }
        reason = (
            None if run.returncode == 0 else _first_line(run.stderr) or f"grade exited with {run.returncode}"
        )
        return {
            "exit": run.returncode,
            "reason": reason,
            "files": outputs,
            "elapsed_s": time.monotonic() - started,
        }


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def _first_line(data: bytes) -> str:
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else ""


# --- the driver ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """A submission to grade: its key and the files its task receives."""

    submission: Submission
    key: str
    files: dict[str, bytes]


def previous(out: Path) -> dict:
    """The class file of an earlier run into ``out`` ({} when there is none)."""
    try:
        data = json.loads((out / CLASS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_current(out: Path, submission: Submission, key: str) -> bool:
    folder = out / submission.id
    try:
        return (folder / "key").read_text().strip() == key and (folder / "results.json").is_file()
    except OSError:
        return False


def plan(
    submissions: list[Submission], out: Path, settings: Settings, only: list[str]
) -> tuple[dict[str, Outcome], list[Job]]:
    """What needs no grading (current in ``out``, or refused), and the jobs of the rest; no Ray needed."""
    known, jobs = {}, []
    for submission in submissions:
        if submission.refused:
            known[submission.id] = Outcome(submission, "refused", submission.refused)
            continue
        files, skipped = submission_files(submission.folder)
        submission = replace(submission, skipped=submission.skipped + tuple(skipped))
        key = submission_key(files, submission, settings)
        if is_current(out, submission, key) and not any(submission.matches(name) for name in only):
            if not (out / submission.id / SOURCE).is_dir():  # graded before sources were kept
                keep_sources(out / submission.id, files)
            known[submission.id] = Outcome(submission, "current")
        else:
            jobs.append(Job(submission, key, files))
    return known, jobs


def keep_sources(folder: Path, files: dict[str, bytes]) -> None:
    """``folder/source/``: the kernel sources and .zip files grading read, for the class report."""
    shutil.rmtree(folder / SOURCE, ignore_errors=True)
    (folder / SOURCE).mkdir(parents=True)  # an empty submission's too: it is not "gone"
    _write_tree(folder / SOURCE, {name: data for name, data in files.items() if read_limit(name)})


def store(out: Path, job: Job, answer: dict, course: Course) -> Outcome:
    """Write what a task returned, and the sources it graded; the fallback results.json where
    ``grade`` wrote none."""
    folder = out / job.submission.id
    folder.mkdir(parents=True, exist_ok=True)
    files = dict(answer["files"])
    if "results.json" not in files:
        reason = answer["reason"] or "the grader wrote no results.json"
        files["results.json"] = json.dumps(fallback_results(course.rubric, reason), indent=2).encode()
    for name, content in files.items():
        (folder / name).write_bytes(content)
    keep_sources(folder, job.files)
    status = "graded" if answer["exit"] == 0 else "failed"
    # the key last: a run stopped before this point regrades the submission
    (folder / "key").write_text(job.key + "\n" if status == "graded" else "failed\n")
    gpu_s = answer.get("gpu", {}).get("busy_s")
    return Outcome(job.submission, status, answer["reason"], answer.get("elapsed_s", 0.0), gpu_s)


def reference_ledger(course: Course, names: list[str]) -> dict[str, dict]:
    """The reference's totals on each assignment's roofline case, for the class report's rooflines;
    empty when the emulator cannot give them (the class's grades never depend on it)."""
    limits = course.rubric.limits
    try:
        emulator = select_backend("emulator", limits.compile_s, limits.emulator_mb)
    except BackendError as e:
        return _no_ledger(e)
    try:
        return ledger.class_ledger(course, names, emulator)
    except BackendError as e:
        return _no_ledger(e)
    finally:
        emulator.close()


def _no_ledger(error: BackendError) -> dict:
    LOG.warning(
        "the class report will have no rooflines: the emulator could not count the reference: %s", error
    )
    return {}


def class_ledger(out: Path, course: Course, settings: Settings) -> tuple[str | None, dict[str, dict]]:
    """The reference ledger and its key: the last run's when the course, the assignments and the
    grader are the same (the emulator takes seconds to count it), else counted now."""
    names = list(settings.assignments) or list(course.specs)
    course_key = settings.course_key or digest(course_files(course))
    key = digest({}, course_key, sorted(names), grader_version())
    earlier = previous(out)
    if earlier.get("ledger_key") == key and isinstance(earlier.get("ledger"), dict):
        return key, earlier["ledger"]
    counted = reference_ledger(course, names)
    return (key if counted else None), counted  # an emulator that failed is asked again next time


def write_class(out: Path, course: Course, settings: Settings, outcomes: list[Outcome]) -> None:
    """``class.json`` (the class's seed and every submission's status), ``scores.csv``, ``regrades.csv``."""
    rubric = {
        name: [
            {
                "name": i.name,
                "check": i.check,
                "cases": i.cases,
                "points": i.points,
                "metric": i.metric,
                "full_at": i.full_at,
                "zero_at": i.zero_at,
                "visibility": i.visibility,
            }
            for i in items
        ]
        for name, items in course.rubric.assignments.items()
    }
    ledger_key, reference = class_ledger(out, course, settings)
    kept = [o for o in outcomes if o.status != "refused"]
    data = {
        "course": course.rubric.course,
        "seed": settings.seed,
        "backend": settings.backend,
        "assignments": list(settings.assignments),
        "rubric": rubric,
        "kernels": kernels(course),
        "ledger": reference,
        "ledger_key": ledger_key,
        "submissions": [
            {
                "id": o.submission.id,
                "submitters": [asdict(s) for s in o.submission.submitters],
                "status": "graded" if o.status == "current" else o.status,
                "reason": o.reason,
                "source": f"{o.submission.id}/{SOURCE}",  # relative to DIR
                "folder": o.submission.id,
                "skipped": list(o.submission.skipped),
            }
            for o in kept
        ],
        "refused": [
            {"entry": o.submission.id, "reason": o.reason} for o in outcomes if o.status == "refused"
        ],
    }
    (out / CLASS_FILE).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    reports = {o.submission.id: _report(out / o.submission.id) for o in kept}
    _write_scores(out / "scores.csv", course, kept, reports)
    _write_regrades(out / "regrades.csv", outcomes, reports)


def _report(folder: Path) -> dict:
    try:
        return json.loads((folder / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_scores(path: Path, course: Course, outcomes: list[Outcome], reports: dict[str, dict]) -> None:
    """Gradescope's score upload: Name, SID, Email, Total, then a column per item any submission has."""
    graded = {i["name"] for report in reports.values() for i in report.get("items", [])}
    items = [item.name for item in course.rubric.items if item.name in graded]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Name", "SID", "Email", "Total", *map(text_cell, items)])
        for outcome in outcomes:
            report = reports[outcome.submission.id]
            scores = {i["name"]: i["score"] for i in report.get("items", [])}
            cells = [
                _number(report.get("score", 0.0)),
                *(_number(scores[n]) if n in scores else "" for n in items),
            ]
            for person in outcome.submission.submitters or (Submitter(name=outcome.submission.id),):
                writer.writerow([*map(text_cell, (person.name, person.sid, person.email)), *cells])


def _write_regrades(path: Path, outcomes: list[Outcome], reports: dict[str, dict]) -> None:
    """Every item a TA should look at, with the first line of its output; failed and refused
    submissions as a whole."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "students", "item", "score", "max_score", "reason"])
        for outcome in outcomes:
            who = "; ".join(s.name or s.email or s.sid for s in outcome.submission.submitters)
            texts = (outcome.submission.id, who)
            if outcome.status in ("failed", "refused"):
                reason = outcome.reason or ""
                writer.writerow([*map(text_cell, (*texts, "(whole submission)")), 0, "", text_cell(reason)])
            for item in reports.get(outcome.submission.id, {}).get("items", []):
                if item.get("regrade"):
                    reason = (item.get("output") or "").strip().splitlines()[:1]
                    score, most = _number(item["score"]), item["max_score"]
                    writer.writerow(
                        [*map(text_cell, (*texts, item["name"])), score, most, *map(text_cell, reason)]
                    )


def _number(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")


def class_seed(out: Path, seed: int | None) -> int:
    """``seed``, else the one an earlier run into ``out`` drew, else a fresh one."""
    if seed is not None:
        return seed
    earlier = previous(out).get("seed")
    return earlier if isinstance(earlier, int) else secrets.randbits(63)


def import_ray(address: str | None):
    """Ray (the batch extra; not in the base install), its embedded cluster's authentication chosen.

    Ray 2.5x turns token authentication on for a cluster ``ray.init()`` starts, and warns so on
    every run unless ``RAY_AUTH_MODE`` is set; it reads the variable once, when imported, and the
    cluster's processes inherit it. So before the first import, for an embedded cluster only,
    Ray's own default is chosen (``token``): the same security, no warning. A cluster joined
    with ``--address`` keeps whatever mode it was started with.
    """
    if address is None and "ray" not in sys.modules:
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    return ray


def start_ray(address: str | None, settings: Settings, course_key: str) -> Settings:
    """Join the Ray cluster at ``address`` (None: start an embedded one); return ``settings`` with
    the backend resolved on that cluster."""
    ray = import_ray(address)
    ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    resources = ray.cluster_resources()
    gpus_present = resources.get("GPU", 0) > 0
    settings = replace(settings, backend=resolve_where(settings.backend, gpus_present), course_key=course_key)
    LOG.info(
        "Ray cluster %s: %g CPUs, %g GPUs; the %s backend grades",
        address or "embedded",
        resources.get("CPU", 0),
        resources.get("GPU", 0),
        settings.backend,
    )
    return settings


def _task(function: Callable, cpus: int, gpus: float):
    """``function`` as a Ray task holding ``cpus`` and ``gpus``, retried by Ray when its worker dies."""
    import ray  # the batch extra; imported first by ``start_ray``

    return ray.remote(function).options(
        num_cpus=cpus, num_gpus=gpus, max_retries=MAX_RETRIES, retry_exceptions=False
    )


def whole_task(settings: Settings):
    """A whole grading (:func:`grade_files`) as one task holding a CPU and its share of a GPU:
    each job of ``autograder serve``, whose emulator checks overlap other jobs' turns on the GPU."""
    return _task(grade_files, 1, settings.gpu_share)


@dataclass(frozen=True)
class Tasks:
    """A batch's Ray tasks: a submission is one task (:func:`grade_files`); on a GPU two, so that
    the GPU waits for no compile or emulator check: the GPU task (:func:`time_files`) grades the
    timed items alone, holding the GPU and asking for no CPU (it never waits behind CPU tasks for a
    core), and the CPU task, which Ray runs once that answer exists, grades the rest and merges it."""

    grade: Any
    time: Any | None = None

    @classmethod
    def of(cls, settings: Settings) -> Tasks:
        if not settings.gpus:
            return cls(_task(grade_files, 1, 0))
        return cls(_task(grade_files, 1, 0), _task(time_files, 0, settings.gpu_share))

    def submit(self, course_ref, files: dict[str, bytes], seed: int, settings: Settings):
        """A submission's grading, submitted; the reference to its (CPU) task's answer."""
        if self.time is None:
            return self.grade.remote(course_ref, files, seed, settings)
        import ray

        files_ref = ray.put(files)
        timed = self.time.remote(course_ref, files_ref, seed, settings)
        return self.grade.remote(course_ref, files_ref, seed, settings, timed)


def lost_task(error: Exception) -> dict:
    """What a task whose worker or node died every time it was tried answers, in its stead."""
    return {"exit": None, "reason": f"the grading task failed: {type(error).__name__}", "files": {}}


def expected_backend(asked: str, out: Path) -> str:
    """The backend ``asked`` resolves to, guessed before Ray starts: ``auto`` as the last run into
    ``out`` resolved it (else the emulator). Ray starts only when some submission is not current
    under that guess, and a cluster that resolves ``auto`` otherwise regrades the class."""
    earlier = previous(out).get("backend")
    return resolve_where(asked, earlier in CLASSES and holds_a_gpu(earlier))


def grade_class(
    submissions: list[Submission],
    course: Course,
    out: Path,
    settings: Settings,
    address: str | None = None,
    only: Iterable[str] = (),
    shown: Callable[[Outcome, int], None] | None = None,
) -> list[Outcome]:
    """Grade every submission not current in ``out`` (and every one ``only`` names) on Ray, which
    starts only when there is one.

    ``shown(outcome, running)`` hears of each submission once it is done (or found current or
    refused), with how many tasks are running then.
    """
    only = list(only)
    shown = shown or (lambda outcome, running: None)
    course_data = course_files(course)
    asked = settings.backend
    settings = replace(settings, backend=expected_backend(asked, out), course_key=digest(course_data))
    known, jobs = plan(submissions, out, settings, only)
    started = bool(jobs)
    if started:
        resolved = start_ray(address, replace(settings, backend=asked), settings.course_key)
        if resolved.backend != settings.backend:  # ``auto`` resolved otherwise than guessed
            LOG.info(
                "the cluster resolves %s to %s, not %s: planned again",
                asked,
                resolved.backend,
                settings.backend,
            )
            settings = resolved
            known, jobs = plan(submissions, out, settings, only)
    LOG.info("%d to grade, %d current or refused (not graded again)", len(jobs), len(known))
    for outcome in known.values():
        shown(outcome, 0)
    if started:
        known |= _grade_on_ray(jobs, Tasks.of(settings), course, course_data, out, settings, shown)
    ordered = [known[s.id] for s in submissions]
    write_class(out, course, settings, ordered)
    return ordered


def _grade_on_ray(jobs, tasks, course, course_data, out, settings, shown) -> dict[str, Outcome]:
    """Each job its tasks; each answer stored as it arrives. Shuts Ray down."""
    import ray  # the batch extra; not in the base install

    done = {}
    try:
        slots = int(ray.cluster_resources().get("CPU", 1))  # a GPU class's CPU tasks run side by side
        course_ref = ray.put(course_data)
        pending = {
            tasks.submit(course_ref, job.files, submission_seed(settings.seed, job.submission), settings): job
            for job in jobs
        }
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ready[0])
            try:
                answer = ray.get(ready[0])
            except ray.exceptions.RayError as e:  # its worker or node died MAX_RETRIES + 1 times
                LOG.warning("%s: its grading task failed %d times: %s", job.submission.id, MAX_RETRIES + 1, e)
                answer = lost_task(e)
            done[job.submission.id] = store(out, job, answer, course)
            shown(done[job.submission.id], min(len(pending), slots))
    finally:
        ray.shutdown()
    return done
