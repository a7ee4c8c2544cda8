"""``autograder batch`` without Ray: reading a class, keys and seeds, the class files.

Grading a class on Ray (embedded), resuming, ``--only`` and a killed worker are in
tests/delivery/test_batch.py.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import zipfile

import pytest

from autograder.delivery import batch
from autograder.delivery.batch import Job, Settings, Submission, Submitter

from .conftest import write

# As Gradescope writes it: Ruby symbols, a Ruby object tag, a group submission.
METADATA = """\
submission_101:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2026-11-30 23:59:01.000000000 -08:00
  :score: 0.0
submission_102:
  :submitters:
  - :name: Alan Turing
    :sid: '1912'
    :email: alan@example.edu
  - :name: Grace Hopper
    :sid: '1906'
    :email: grace@example.edu
  :history: !ruby/object:ActiveSupport::HashWithIndifferentAccess
    attempts: 2
submission_999:
  :submitters: []
"""


def export(folder):
    """An export folder: metadata and two submission folders (999 is named but has no folder)."""
    write(folder / "submission_metadata.yml", METADATA)
    write(folder / "submission_101/vec.cu", "ada's kernel")
    write(folder / "submission_102/hw/vec.cu", "alan and grace's kernel")
    return folder


def test_an_export_folder_gives_each_submission_its_submitters(tmp_path):
    submissions = batch.read_class(export(tmp_path / "export"), tmp_path / "scratch")
    assert [s.id for s in submissions] == ["submission_101", "submission_102"]
    assert submissions[0].submitters == (Submitter("Ada Lovelace", "1815", "ada@example.edu"),)
    assert [p.name for p in submissions[1].submitters] == ["Alan Turing", "Grace Hopper"]


def test_an_export_zip_is_read_through_its_top_folder(tmp_path):
    folder = export(tmp_path / "assignment_77_export")
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in folder.rglob("*"):
            z.write(path, path.relative_to(tmp_path).as_posix())
    submissions = batch.read_class(archive, tmp_path / "scratch")
    assert [s.id for s in submissions] == ["submission_101", "submission_102"]
    assert (submissions[1].folder / "hw/vec.cu").read_text() == "alan and grace's kernel"


def test_a_plain_folder_is_one_submission_per_subfolder(tmp_path):
    write(tmp_path / "class/bob/vec.cu", "b")
    write(tmp_path / "class/amy/vec.cu", "a")
    write(tmp_path / "class/notes.txt", "not a submission")
    submissions = batch.read_class(tmp_path / "class", tmp_path / "scratch")
    assert [(s.id, s.submitters) for s in submissions] == [("amy", ()), ("bob", ())]


def test_unreadable_metadata_is_a_clear_error(tmp_path):
    write(tmp_path / "export/submission_metadata.yml", "- [unclosed")
    with pytest.raises(batch.BatchError, match=r"submission_metadata\.yml cannot be read"):
        batch.read_class(tmp_path / "export", tmp_path / "scratch")


def test_only_names_a_submission_by_folder_name_sid_or_email_in_any_case(tmp_path):
    group = Submission("submission_102", tmp_path, (Submitter("Alan Turing", "1912", "alan@x.edu"),))
    assert all(group.matches(w) for w in ("submission_102", "alan turing", "1912", "ALAN@x.edu"))
    assert not group.matches("Turing")


def test_the_key_changes_with_the_files_the_seed_the_backend_and_the_course(tmp_path):
    one = Submission("s", tmp_path)
    settings = Settings(backend="emulator", seed=1, course_key="c1")
    key = batch.submission_key({"vec.cu": b"x"}, one, settings)
    assert key == batch.submission_key(
        {"vec.cu": b"x"}, one, Settings(backend="emulator", seed=1, course_key="c1")
    )
    others = [
        batch.submission_key({"vec.cu": b"y"}, one, settings),
        batch.submission_key({"other.cu": b"x"}, one, settings),
        batch.submission_key({"vec.cu": b"x"}, one, Settings(backend="emulator", seed=2, course_key="c1")),
        batch.submission_key({"vec.cu": b"x"}, one, Settings(backend="gpu", seed=1, course_key="c1")),
        batch.submission_key({"vec.cu": b"x"}, one, Settings(backend="emulator", seed=1, course_key="c2")),
        batch.submission_key(
            {"vec.cu": b"x"}, one, settings.__class__("emulator", 1, ("vec",), course_key="c1")
        ),
    ]
    assert key not in others and len(set(others)) == len(others)


def test_each_submission_has_its_own_seed_the_same_on_every_run(tmp_path):
    a, b = Submission("a", tmp_path), Submission("b", tmp_path)
    assert batch.submission_seed(7, a) == batch.submission_seed(7, a) != batch.submission_seed(7, b)
    assert 0 <= batch.submission_seed(7, a) < 2**63


def test_the_class_seed_is_kept_for_the_next_run(tmp_path):
    assert batch.class_seed(tmp_path, 5) == 5
    (tmp_path / batch.CLASS_FILE).write_text(json.dumps({"seed": 1234}))
    assert batch.class_seed(tmp_path, None) == 1234


def answer(exit_code, score):
    report = {
        "score": score,
        "items": [
            {
                "name": "vec correctness (aligned)",
                "score": score,
                "max_score": 2,
                "regrade": exit_code != 0,
                "output": "grader error\nmore",
            }
        ],
    }
    files = {"results.json": b"{}", "report.json": json.dumps(report).encode()}
    return {"exit": exit_code, "reason": None if exit_code == 0 else "boom", "files": files, "elapsed_s": 1.0}


def test_the_class_files_scores_per_submitter_and_regrades(course, tmp_path):
    ada = Submission("s1", tmp_path, (Submitter("Ada", "1815", "ada@x.edu"),))
    pair = Submission(
        "s2", tmp_path, (Submitter("Alan", "1912", "a@x.edu"), Submitter("Grace", "1906", "g@x.edu"))
    )
    settings = Settings(backend="emulator", seed=3)
    outcomes = [
        batch.store(tmp_path, Job(ada, "k1", {}), answer(0, 2.0), course),
        batch.store(tmp_path, Job(pair, "k2", {}), answer(2, 0.5), course),
    ]
    batch.write_class(tmp_path, course, settings, outcomes)
    rows = list(csv.reader((tmp_path / "scores.csv").open()))
    assert rows[0] == ["Name", "SID", "Email", "Total", "vec correctness (aligned)"]
    assert rows[1:] == [
        ["Ada", "1815", "ada@x.edu", "2", "2"],
        ["Alan", "1912", "a@x.edu", "0.5", "0.5"],
        ["Grace", "1906", "g@x.edu", "0.5", "0.5"],
    ]
    regrades = list(csv.reader((tmp_path / "regrades.csv").open()))
    assert regrades[1] == ["s2", "Alan; Grace", "(whole submission)", "0", "", "boom"]
    assert regrades[2] == ["s2", "Alan; Grace", "vec correctness (aligned)", "0.5", "2", "grader error"]
    assert (tmp_path / "s1/key").read_text() == "k1\n" and (tmp_path / "s2/key").read_text() == "failed\n"
    data = json.loads((tmp_path / batch.CLASS_FILE).read_text())
    assert data["seed"] == 3 and [s["status"] for s in data["submissions"]] == ["graded", "failed"]


def test_a_task_that_wrote_nothing_still_leaves_a_results_json_with_every_item_at_0(course, tmp_path):
    lost = {"exit": None, "reason": "the grading task failed: WorkerCrashedError", "files": {}}
    outcome = batch.store(tmp_path, Job(Submission("s", tmp_path), "k", {}), lost, course)
    results = json.loads((tmp_path / "s/results.json").read_text())
    assert outcome.status == "failed" and results["score"] == 0
    assert len(results["tests"]) == len(course.rubric.items)
    assert all("WorkerCrashedError" in t["output"] for t in results["tests"])
    assert not batch.is_current(tmp_path, Submission("s", tmp_path), "k")


FORMULAS = ('=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\r=1")


def test_no_cell_of_student_text_is_a_formula_and_our_numbers_stay_numbers(course, tmp_path, monkeypatch):
    """OWASP's CSV injection: a spreadsheet runs a cell starting with = + - @, a tab or a CR."""
    monkeypatch.setattr(batch, "reference_ledger", lambda course, names: {})
    people = tuple(Submitter(f, f, f) for f in FORMULAS)
    crafted = Submission("=cmd|' /C calc'!A0", tmp_path, people)
    report = {"score": -1.5, "items": [{"name": "vec correctness (aligned)", "score": -1.5, "max_score": 2}]}
    report["items"][0] |= {"regrade": True, "output": "=IMPORTXML(A1)\nmore"}
    graded = {"exit": 0, "reason": None, "files": {"report.json": json.dumps(report).encode()}}
    failed = {"exit": 2, "reason": "-bad", "files": {}}
    outcomes = [
        batch.store(tmp_path, Job(crafted, "k", {}), graded, course),
        batch.store(tmp_path, Job(Submission("@x", tmp_path, people[:1]), "k", {}), failed, course),
    ]
    batch.write_class(tmp_path, course, Settings(backend="emulator", seed=3), outcomes)
    scores = list(csv.reader((tmp_path / "scores.csv").open(newline="")))
    regrades = list(csv.reader((tmp_path / "regrades.csv").open(newline="")))
    texts = [row[:3] for row in scores[1:]] + [[*row[:3], row[5]] for row in regrades[1:]]
    assert all(cell[:1] not in "=+-@\t\r" or cell == "" for row in texts for cell in row), texts
    assert [row[0] for row in scores[1:]] == [f"'{f}" for f in FORMULAS] + ["'" + FORMULAS[0]]
    numbers = [row[3:] for row in scores[1:]] + [row[3:5] for row in regrades[1:]]
    assert all(float(cell) <= 2 for row in numbers for cell in row if cell)  # -1.5 is written -1.5
    assert scores[1][3] == "-1.5"


def job(tmp_path, name: str, files: dict[str, str]) -> batch.Job:
    folder = tmp_path / "class" / name
    for rel, text in files.items():
        write(folder / rel, text)
    return Job(Submission(name, folder), "k", {})


GRADED = {"exit": 0, "reason": None, "files": {"results.json": b"{}"}}


def test_the_sources_graded_are_kept_beside_the_results_and_named_relative_to_dir(
    course, tmp_path, monkeypatch
):
    """A zip's folder is gone after the batch: the class report reads DIR/<id>/source/ instead."""
    monkeypatch.setattr(batch, "reference_ledger", lambda course, names: {})
    write(tmp_path / "class/amy/src/vec.cu", "amy's kernel")
    write(tmp_path / "class/amy/notes.txt", "not graded")
    (amy,) = batch.read_class(tmp_path / "class", tmp_path / "scratch")
    settings = Settings(backend="emulator", seed=3)
    _, (job,) = batch.plan([amy], tmp_path / "out", settings, [])
    outcome = batch.store(tmp_path / "out", job, GRADED, course)
    batch.write_class(tmp_path / "out", course, settings, [outcome])
    source = tmp_path / "out/amy/source"
    assert sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()) == [
        "src/vec.cu"
    ]
    entry = json.loads((tmp_path / "out" / batch.CLASS_FILE).read_text())["submissions"][0]
    assert entry["source"] == "amy/source" and (tmp_path / "out" / entry["source"] / "src/vec.cu").is_file()
    shutil.rmtree(source)  # a DIR graded before sources were kept
    known, jobs = batch.plan([amy], tmp_path / "out", settings, [])
    assert jobs == [] and known["amy"].status == "current" and (source / "src/vec.cu").is_file()


def test_a_rerun_with_nothing_to_grade_starts_no_ray_and_counts_no_ledger(course, tmp_path, monkeypatch):
    counted = []
    monkeypatch.setattr(batch, "reference_ledger", lambda course, names: counted.append(names) or {"vec": {}})
    write(tmp_path / "class/amy/vec.cu", "amy's kernel")
    submissions = batch.read_class(tmp_path / "class", tmp_path / "scratch")
    out, settings = tmp_path / "out", Settings(backend="emulator", seed=3)
    settings = batch.replace(settings, course_key=batch.digest(batch.course_files(course)))
    _, jobs = batch.plan(submissions, out, settings, [])
    outcomes = [batch.store(out, j, GRADED, course) for j in jobs]
    batch.write_class(out, course, settings, outcomes)
    assert len(counted) == 1

    def no_ray(*args):
        raise AssertionError("Ray started with nothing to grade")

    monkeypatch.setattr(batch, "start_ray", no_ray)
    rerun = batch.grade_class(submissions, course, out, Settings(backend="emulator", seed=3))
    assert [o.status for o in rerun] == ["current"] and len(counted) == 1  # the ledger kept
    assert json.loads((out / batch.CLASS_FILE).read_text())["ledger"] == {"vec": {}}
    write(course.root / "reference/vec.cu", "// the course changed")
    batch.write_class(out, course, settings.__class__("emulator", 3), rerun)
    assert len(counted) == 2


def test_refused_entries_are_listed_and_never_written(course, tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "reference_ledger", lambda course, names: {})
    write(tmp_path / "export/submission_metadata.yml", "'../../escaped':\n  :submitters: []\n")
    (refused,) = batch.read_class(tmp_path / "export", tmp_path / "scratch")
    out = tmp_path / "deep/out"
    out.mkdir(parents=True)
    outcomes = batch.grade_class([refused], course, out, Settings(backend="emulator", seed=3))
    assert [o.status for o in outcomes] == ["refused"] and not (tmp_path / "escaped").exists()
    data = json.loads((out / batch.CLASS_FILE).read_text())
    assert data["submissions"] == [] and data["refused"] == [{"entry": refused.id, "reason": refused.refused}]
    assert "(whole submission)" in (out / "regrades.csv").read_text()


def test_the_batch_command_counts_refused_entries_in_its_summary(course_root, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from autograder import cli

    monkeypatch.setattr(batch, "reference_ledger", lambda course, names: {})
    write(tmp_path / "export/submission_metadata.yml", "'../../escaped':\n  :submitters: []\n")
    args = ["batch", str(tmp_path / "export"), "--out", str(tmp_path / "out"), "--course", str(course_root)]
    outcome = CliRunner().invoke(cli.main, args)
    assert outcome.exit_code == 0, outcome.output
    assert "0 graded, 0 current (not regraded), 0 failed, 1 refused (not graded: see regrades.csv)" in (
        outcome.output
    )


def test_auto_is_guessed_as_the_last_run_resolved_it_before_ray_starts(tmp_path):
    assert batch.expected_backend("auto", tmp_path) == "emulator"  # no last run
    (tmp_path / batch.CLASS_FILE).write_text(json.dumps({"backend": "gpu"}))
    assert batch.expected_backend("auto", tmp_path) == "gpu"
    assert batch.expected_backend("emulator", tmp_path) == "emulator"
    (tmp_path / batch.CLASS_FILE).write_text(json.dumps({"backend": "crafted"}))
    assert batch.expected_backend("auto", tmp_path) == "emulator"


CHOSEN_AUTH = """
import os, sys
from autograder.delivery import batch
os.environ.pop("RAY_AUTH_MODE", None)
batch.import_ray(sys.argv[1] or None)
print(os.environ.get("RAY_AUTH_MODE"))
"""


@pytest.mark.parametrize(("address", "mode"), [("", "token"), ("auto", "None")])
def test_the_embedded_cluster_has_its_authentication_chosen_before_ray_is_imported(address, mode):
    """Ray 2.60 warns on every ray.init() unless RAY_AUTH_MODE is set, and reads it on import only."""
    pytest.importorskip("ray")
    done = subprocess.run([sys.executable, "-c", CHOSEN_AUTH, address], capture_output=True, text=True)
    assert done.stdout.strip() == mode, done.stderr
