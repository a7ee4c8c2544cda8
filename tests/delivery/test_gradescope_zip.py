"""The Gradescope upload, end to end: build autograder.zip, install it as Gradescope does, grade.

``autograder gradescope vector_add window_sum`` writes the zip; it is unpacked into a
temporary ``/autograder`` layout (``source/``, ``submission/``, ``results/``, and
``run_autograder`` copied beside them, as Gradescope copies it), its ``setup.sh`` runs in a
fresh virtual environment, and its ``run_autograder`` grades five submissions on the
emulator. The totals must all be the rubric's.

The virtual environment is a plain ``python3 -m venv`` (no ``--system-site-packages``):
``setup.sh`` installs the grader and every pinned dependency from PyPI into it, as on
Gradescope, and then runs ``autograder selfcheck`` on the zip's course. Measured on the 2-core
development machine on 2026-12-02: 23-26 s in all (most of it the pip install, NVRTC's 58 MB wheel included,
no cache), well under the 3 minutes that would call for ``--system-site-packages`` and reusing
this machine's packages. It needs PyPI, which the
developers' machines and CI reach; ``pytest -s`` prints the time setup.sh took.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = ("vector_add", "window_sum")
GUARDED = "if (i < n) c[i] = a[i] + b[i];"


def build(out: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "autograder", "gradescope", *ASSIGNMENTS, "--course", str(ROOT)]
    return subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, timeout=120)


def unzip(archive: Path, folder: Path) -> None:
    """Unpack with the modes the zip records (Python's extractall drops them; unzip keeps them)."""
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            path = Path(opened.extract(info, folder))
            path.chmod((info.external_attr >> 16) & 0o777)


@pytest.fixture(scope="module")
def gradescope(tmp_path_factory):
    """The /autograder layout after Gradescope's image build, and the environment to run in it."""
    work = tmp_path_factory.mktemp("gradescope")
    built = build(work / "autograder.zip")
    assert built.returncode == 0, built.stderr
    root = work / "autograder"
    unzip(work / "autograder.zip", root / "source")
    shutil.copy2(root / "source/run_autograder", root / "run_autograder")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "AUTOGRADER_COURSE")}
    env |= {"PATH": f"{venv}/bin:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("AUTOGRADER_ASSIGNMENTS", None)
    started = time.monotonic()
    setup = subprocess.run(
        ["bash", str(root / "source/setup.sh")], env=env, capture_output=True, text=True, timeout=900
    )
    print(f"setup.sh took {time.monotonic() - started:.1f} s")
    assert setup.returncode == 0, setup.stdout[-4000:] + setup.stderr[-4000:]
    return root, env | {"AUTOGRADER_ROOT": str(root)}


def grade(gradescope, files: dict[str, str]) -> dict:
    """Run the installed run_autograder on a submission of ``files`` (relative name → text)."""
    root, env = gradescope
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    for name, text in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    run = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads((root / "results/results.json").read_text())


def references() -> dict[str, str]:
    return {f"{name}.cu": (ROOT / "reference" / f"{name}.cu").read_text() for name in ASSIGNMENTS}


def scores(results: dict) -> dict[str, float]:
    return {t["name"]: t["score"] for t in results["tests"]}


def total(results: dict) -> float:
    return sum(t["max_score"] for t in results["tests"])


@pytest.fixture(scope="module")
def graded(gradescope):
    correct = references()
    buggy = {**correct, "vector_add.cu": correct["vector_add.cu"].replace(GUARDED, "c[i] = a[i] + b[i];")}
    assert buggy != correct
    return {
        "correct": grade(gradescope, correct),
        "buggy": grade(gradescope, buggy),
        "nested": grade(gradescope, {f"hw1/src/{name}": text for name, text in correct.items()}),
        "empty": grade(gradescope, {}),
        "one file": grade(gradescope, {"vector_add.cu": correct["vector_add.cu"]}),
    }


def test_two_builds_of_the_same_course_are_byte_identical(tmp_path):
    assert build(tmp_path / "a.zip").returncode == 0 and build(tmp_path / "b.zip").returncode == 0
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()


def test_every_submission_is_graded_out_of_the_rubrics_total(graded):
    names = {kind: [t["name"] for t in results["tests"]] for kind, results in graded.items()}
    assert len({tuple(n) for n in names.values()}) == 1 and len(names["correct"]) == 11
    assert {kind: total(results) for kind, results in graded.items()} == dict.fromkeys(graded, 32.0)


def test_results_json_is_gradescopes_format(graded):
    for results in graded.values():
        assert isinstance(results["score"], float) and isinstance(results["output"], str)
        for test in results["tests"]:
            assert {"name", "score", "max_score", "output", "visibility", "number"} <= test.keys()
            assert 0 <= test["score"] <= test["max_score"]
        assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))


def test_the_references_score_all_but_the_gpu_items(graded):
    for test in graded["correct"]["tests"]:
        gpu = "performance" in test["name"]
        assert test["score"] == (0 if gpu else test["max_score"]), test
    assert graded["correct"]["score"] == 26


def test_the_unguarded_vector_add_loses_its_bounds_points_only(graded):
    correct, buggy = scores(graded["correct"]), scores(graded["buggy"])
    assert correct["vector_add bounds (safety)"] == 3 and buggy["vector_add bounds (safety)"] == 0
    assert {k: v for k, v in buggy.items() if k != "vector_add bounds (safety)"} == {
        k: v for k, v in correct.items() if k != "vector_add bounds (safety)"
    }
    bounds = next(t for t in graded["buggy"]["tests"] if t["name"] == "vector_add bounds (safety)")
    assert "past its end" in bounds["output"]


def test_a_nested_submission_scores_like_the_flat_one(graded):
    assert scores(graded["nested"]) == scores(graded["correct"])
    assert "hw1/src/vector_add.cu" in graded["nested"]["output"]


def test_an_empty_submission_scores_zero_with_the_reason(graded):
    assert graded["empty"]["score"] == 0
    assert all("was not submitted" in t["output"] for t in graded["empty"]["tests"])
    assert "the submission is empty" in graded["empty"]["tests"][0]["output"]


def test_a_missing_assignment_still_counts_in_the_total(graded):
    results = graded["one file"]
    window = [t for t in results["tests"] if t["name"].startswith("window_sum")]
    assert len(window) == 6 and all(t["score"] == 0 for t in window) and total(results) == 32
    assert results["score"] == 12  # vector_add in full, but for its GPU item
