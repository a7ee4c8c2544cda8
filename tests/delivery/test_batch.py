"""``autograder batch`` end to end on an embedded Ray cluster, with the real course (vector_add).

A small Gradescope export (four submissions: correct, starter, unguarded, empty) is graded
once; every submission's results.json and report must be what ``autograder grade`` writes
for it alone with the same seed. A re-run regrades nothing, an edited submission is
regraded alone, ``--only`` regrades a named student. Then a Ray worker is killed while it
grades: Ray retries its task and the class completes with nothing lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from autograder.delivery import batch

pytest.importorskip("ray", reason="the batch extra (Ray) is not installed: pip install -e '.[batch]'")

ROOT = Path(__file__).resolve().parents[2]
UNGUARDED = (ROOT / "reference/vector_add.cu").read_text().replace("if (i < n) c[i]", "c[i]")
METADATA = "".join(
    f"submission_{k}:\n  :submitters:\n  - :name: {name}\n    :sid: '{k}'\n"
    f"    :email: {name.lower()}@example.edu\n"
    for k, name in ((1, "Ada"), (2, "Brian"), (3, "Carla"), (4, "Dmitri"))
)
VOLATILE = {"execution_time", "elapsed_s", "submission", "wall_s"}
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


def make_export(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "submission_metadata.yml").write_text(METADATA)
    for k, source in (
        (1, (ROOT / "reference/vector_add.cu").read_text()),
        (2, None),
        (3, UNGUARDED),
        (4, ""),
    ):
        (folder / f"submission_{k}").mkdir()
        text = (ROOT / "starter/vector_add.cu").read_text() if source is None else source
        if text:
            (folder / f"submission_{k}/vector_add.cu").write_text(text)
    return folder


def run_batch(source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "autograder",
        "batch",
        str(source),
        "--out",
        str(out),
        "--course",
        str(ROOT),
    ]
    command += ["--backend", "emulator", "--assignment", "vector_add", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=ENV)


def statuses(run: subprocess.CompletedProcess) -> dict[str, str]:
    """Each submission's status, from the line the batch prints for it."""
    lines = [line.split() for line in run.stdout.splitlines()]
    return {
        words[1]: words[0]
        for words in lines
        if len(words) > 1 and words[0] in ("graded", "current", "failed")
    }


def stable(value):
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def zipped(folder: Path) -> Path:
    """The export as Gradescope gives it: a zip whose one top folder holds it."""
    archive = folder.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(folder.rglob("*")):
            z.write(path, path.relative_to(folder.parent).as_posix())
    return archive


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The export graded from its zip; the folder it was zipped from stays, for the other runs."""
    work = tmp_path_factory.mktemp("batch")
    source, out = make_export(work / "export"), work / "out"
    run = run_batch(zipped(source), out)
    assert run.returncode == 0, run.stdout + run.stderr
    return source, out, run


def test_the_sources_graded_from_a_zip_are_kept_for_the_class_report(graded):
    """The zip was unpacked into a folder that is gone: the report quotes DIR/<id>/source/."""
    _source, out, run = graded
    entries = json.loads((out / batch.CLASS_FILE).read_text())["submissions"]
    assert [e["source"] for e in entries] == [f"submission_{k}/source" for k in (1, 2, 3, 4)]
    assert (out / "submission_3/source/vector_add.cu").read_text() == UNGUARDED
    assert list((out / "submission_4/source").iterdir()) == []  # submitted nothing
    page = (out / "report/students/submission_3.html").read_text()
    assert "no longer on disk" not in page and "c[i] = a[i] + b[i];" in page
    assert "Token authentication" not in run.stderr  # Ray's warning, answered by RAY_AUTH_MODE


def test_every_submission_is_graded_and_scored_per_student(graded):
    _source, out, run = graded
    assert statuses(run) == {f"submission_{k}": "graded" for k in (1, 2, 3, 4)}
    scores = (out / "scores.csv").read_text().splitlines()
    assert scores[0].startswith("Name,SID,Email,Total,vector_add correctness (aligned)")
    assert [row.split(",")[:4] for row in scores[1:]] == [
        ["Ada", "1", "ada@example.edu", "12"],
        ["Brian", "2", "brian@example.edu", "0"],
        ["Carla", "3", "carla@example.edu", "9"],  # right answers, but writes past the end: no bounds points
        ["Dmitri", "4", "dmitri@example.edu", "0"],
    ]


def test_the_class_file_carries_the_references_counts_for_the_rooflines(graded):
    _source, out, _run = graded
    ledger = json.loads((out / batch.CLASS_FILE).read_text())["ledger"]
    assert list(ledger) == ["vector_add"] and list(ledger["vector_add"]["case"]) == ["n"]
    n = ledger["vector_add"]["case"]["n"]  # the roofline's case (ledger.roofline_case)
    assert ledger["vector_add"]["reference"]["global_load_values"] == 2 * n
    assert "roofline of vector_add" in (out / "report/students/submission_1.html").read_text()


def test_each_result_is_what_grade_writes_for_the_submission_alone(graded, tmp_path):
    source, out, _run = graded
    seed = json.loads((out / batch.CLASS_FILE).read_text())["seed"]
    for folder in sorted(p for p in source.glob("submission_*") if p.is_dir()):
        own = batch.submission_seed(seed, batch.Submission(folder.name, folder))
        command = [sys.executable, "-m", "autograder", "grade", str(folder), "--course", str(ROOT)]
        command += ["--backend", "emulator", "--assignment", "vector_add", "--seed", str(own)]
        command += ["--results", str(tmp_path / "results.json"), "--report", str(tmp_path / "report")]
        subprocess.run(command, capture_output=True, timeout=300, check=True)
        for name in ("results.json", "report.json"):
            alone = json.loads((tmp_path / name).read_text())
            assert stable(json.loads((out / folder.name / name).read_text())) == stable(alone), folder.name


def test_a_rerun_regrades_only_what_changed_and_whom_only_names(graded):
    source, out, _run = graded
    assert set(statuses(run_batch(source, out)).values()) == {"current"}
    with (source / "submission_2/vector_add.cu").open("a") as f:
        f.write("// one more line\n")
    changed = statuses(run_batch(source, out, "--only", "carla@example.edu"))
    assert changed == {
        "submission_1": "current",
        "submission_2": "graded",
        "submission_3": "graded",
        "submission_4": "current",
    }


def ray_workers_grading() -> list[int]:
    """Ray workers (``ray::grade_files``) whose child is an ``autograder grade`` process."""
    parents = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if b"autograder" in command and b"grade" in command:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if b"ray::grade_files" in Path(f"/proc/{parent}/cmdline").read_bytes():
                    parents.append(parent)
        except (OSError, ValueError, IndexError):
            continue
    return parents


def test_a_worker_killed_while_grading_loses_nothing(tmp_path):
    source = make_export(tmp_path / "export")
    killed = []

    def kill_first_worker():
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for pid in ray_workers_grading()[:1]:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.2)

    killer = threading.Thread(target=kill_first_worker)
    killer.start()
    run = run_batch(source, tmp_path / "out")
    killer.join()
    assert killed, "no Ray worker was seen grading"
    assert run.returncode == 0, run.stdout + run.stderr
    assert set(statuses(run).values()) == {"graded"}
    assert all((tmp_path / f"out/submission_{k}/results.json").is_file() for k in (1, 2, 3, 4))


def test_on_a_gpu_a_submission_is_a_gpu_task_for_its_timed_items_and_a_cpu_task_that_merges_it(
    tmp_path, monkeypatch
):
    """The GPU pipeline's plumbing on a machine without a GPU: Ray is given one logical GPU and the
    emulator stands in for the GPU task's backend (it cannot time, so the timed item says why). The
    GPU task grades the timed item alone, the CPU task merges its answer and records the GPU part."""
    import functools

    from autograder.course.folder import read_course

    ray = batch.import_ray(None)
    monkeypatch.setattr(ray, "init", functools.partial(ray.init, num_gpus=1))
    monkeypatch.setattr(batch, "holds_a_gpu", lambda name: True)  # the emulator plays the GPU
    monkeypatch.setattr(batch, "reference_ledger", lambda course, names: {})
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    folder = tmp_path / "class/ada"
    folder.mkdir(parents=True)
    (folder / "vector_add.cu").write_text((ROOT / "reference/vector_add.cu").read_text())
    submissions = batch.read_class(tmp_path / "class", tmp_path / "scratch")
    settings = batch.Settings("emulator", seed=3, assignments=("vector_add",), limit_s=900, tasks_per_gpu=2)
    [outcome] = batch.grade_class(submissions, read_course(ROOT), tmp_path / "out", settings)
    assert outcome.status == "graded" and outcome.gpu_s > 0, outcome
    results = json.loads((tmp_path / "out/ada/results.json").read_text())
    timed = [t for t in results["tests"] if t["name"] == "vector_add performance (perf)"]
    assert "(the GPU grading could not run it either (needs a GPU))" in timed[0]["output"]
    assert results["score"] == 12  # everything else: the emulator's grading, full marks
    report = json.loads((tmp_path / "out/ada/report.json").read_text())
    assert report["gpu"]["status"] == "graded" and report["gpu"]["busy_s"] == outcome.gpu_s
    assert report["gpu"]["share"] == 0.5  # a GPU task asks Ray for half a GPU: two share one
    assert "s, a 1/2 share, timing alone (graded)" in (tmp_path / "out/ada/report.md").read_text()
    log = (tmp_path / "out/ada/grade.log").read_text()
    cpu_part, gpu_part = log.split("--- the GPU task (grade --timed-only) ---")
    assert "correctness" in cpu_part and "performance" in cpu_part
    graded_there = [line for line in gpu_part.splitlines() if "vector_add " in line and " / " in line]
    assert len(graded_there) == 1 and graded_there[0].endswith("vector_add performance (perf)"), gpu_part
