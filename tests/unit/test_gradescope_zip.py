"""``autograder gradescope``: the zip's layout, its rubric, its determinism, its errors (fake course).

The end-to-end run of the zip (setup.sh in a fresh virtual environment, then run_autograder
on four submissions) is tests/delivery/test_gradescope_zip.py.
"""

from __future__ import annotations

import json
import re
import stat
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from autograder import cli
from autograder.course.rubric import load_rubric
from autograder.delivery import gpu_service, gradescope_zip, packaging

from .conftest import write

ROOT = Path(__file__).resolve().parents[2]


def build(course_root, out, *names):
    return CliRunner().invoke(
        cli.main, ["gradescope", *map(str, names), "--course", str(course_root), "--out", str(out)]
    )


def test_the_zip_holds_the_scripts_the_package_and_only_the_named_assignments(course_root, tmp_path):
    outcome = build(course_root, tmp_path / "autograder.zip", "vec")
    assert outcome.exit_code == 0, outcome.output
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        names = archive.namelist()
        modes = {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in archive.infolist()}
        assert archive.read("assignments.txt").decode().splitlines()[-1] == "vec"
    assert names == sorted(names)
    assert {"setup.sh", "run_autograder", "pyproject.toml", "README.md", "rubric.yaml"} <= set(names)
    assert {"assignments/vec/spec.py", "reference/vec.cu", "starter/vec.cu"} <= set(names)
    assert "autograder/cli/__init__.py" in names and "autograder/emulator/machine.py" in names
    assert not [n for n in names if "grid2d" in n or "__pycache__" in n or n.endswith(".pyc")]
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755 and modes["rubric.yaml"] == 0o644


def test_the_courses_zip_is_the_upload_of_a_few_hundred_kilobytes_the_guide_describes(tmp_path):
    """The guide gives no size that rots as the grader grows (it said 160 KB of a 260 KB zip)."""
    outcome = build(ROOT, tmp_path / "autograder.zip", "vector_add", "window_sum")
    assert outcome.exit_code == 0, outcome.output
    size = (tmp_path / "autograder.zip").stat().st_size
    assert 100_000 <= size < 1_000_000, f"{size} bytes is not a few hundred kilobytes"
    guide = " ".join((ROOT / "docs/gradescope.md").read_text(encoding="utf-8").split())
    assert "a few hundred kilobytes" in guide and not re.search(r"\b\d+ ?[kK]B upload", guide)


def test_the_rubric_keeps_its_keys_and_the_items_order_of_the_named_assignments(course_root, tmp_path):
    build(course_root, tmp_path / "autograder.zip", "grid2d", "vec")
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        text = archive.read("rubric.yaml").decode()
        listed = archive.read("assignments.txt").decode()
    original = yaml.safe_load((course_root / "rubric.yaml").read_text())
    written = yaml.safe_load(text)
    assert list(written) == list(original) and written["limits"] == original["limits"]
    assert written["assignments"] == original["assignments"]  # both, in the rubric's order
    assert list(written["assignments"]) == ["vec", "grid2d"]
    assert [line for line in listed.splitlines() if not line.startswith("#")] == ["vec", "grid2d"]
    write(tmp_path / "course/rubric.yaml", text)
    assert [i.check for i in load_rubric(tmp_path / "course/rubric.yaml").assignments["vec"]] == [
        "correctness",
        "correctness",
        "bounds",
        "barriers",
        "traffic",
        "performance",
    ]


def test_one_assignment_leaves_the_others_out_of_the_rubric(course_root, tmp_path):
    build(course_root, tmp_path / "autograder.zip", "grid2d")
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        assert list(yaml.safe_load(archive.read("rubric.yaml"))["assignments"]) == ["grid2d"]


def test_two_builds_are_byte_identical(course_root, tmp_path):
    build(course_root, tmp_path / "a.zip", "vec", "grid2d")
    (course_root / "reference/vec.cu").touch()  # a newer date changes nothing
    build(course_root, tmp_path / "b.zip", "grid2d", "vec", "vec")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert {i.date_time for i in archive.infolist()} == {packaging.EPOCH}


def test_an_unknown_assignment_is_a_usage_error(course_root, tmp_path):
    outcome = build(course_root, tmp_path / "autograder.zip", "vec", "vector")
    assert (
        outcome.exit_code == 2
        and "unknown assignment 'vector' (the rubric has: vec, grid2d)" in outcome.output
    )
    assert not (tmp_path / "autograder.zip").exists()


def test_no_assignment_is_a_usage_error(course_root, tmp_path):
    outcome = build(course_root, tmp_path / "autograder.zip")
    assert outcome.exit_code == 2 and "Missing argument 'ASSIGNMENTS...'" in outcome.output


def test_a_missing_reference_is_named(course_root, tmp_path):
    (course_root / "reference/vec.cu").unlink()
    outcome = build(course_root, tmp_path / "autograder.zip", "vec")
    assert outcome.exit_code == 1 and "reference/vec.cu" in outcome.output, outcome.output
    assert not (tmp_path / "autograder.zip").exists()


@pytest.mark.parametrize("script", gradescope_zip.SCRIPTS)
def test_the_scripts_are_the_checkouts_own(course_root, tmp_path, script):
    build(course_root, tmp_path / "autograder.zip", "vec")
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        assert archive.read(script) == (packaging.CHECKOUT / script).read_bytes()


def test_a_gpu_service_is_baked_in_with_its_token_readable_by_the_grader_alone(course_root, tmp_path):
    tokens = tmp_path / "course-token"
    tokens.write_text("# for autograder.zip\ngradescope:" + "k" * 32 + "\n")
    url = "https://gpu.example.edu"
    outcome = build(course_root, tmp_path / "a.zip", "vec", "--gpu-url", url, "--gpu-token-file", tokens)
    assert outcome.exit_code == 0, outcome.output
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        baked = json.loads(archive.read(gpu_service.CONFIG_FILE))
        mode = stat.S_IMODE(archive.getinfo(gpu_service.CONFIG_FILE).external_attr >> 16)
        archive.extractall(tmp_path / "source")
    assert baked == {"url": url, "token": "k" * 32} and mode == 0o600
    assert gpu_service.configured(tmp_path / "source") == gpu_service.Service(url, "k" * 32)
    build(course_root, tmp_path / "b.zip", "vec")
    with zipfile.ZipFile(tmp_path / "b.zip") as archive:
        assert gpu_service.CONFIG_FILE not in archive.namelist()


@pytest.mark.parametrize(
    "options, tokens, words",
    [
        (["--gpu-url", "https://gpu.example.edu"], None, "--gpu-url and --gpu-token-file go together"),
        (["--gpu-url", "gpu.example.edu:8443"], "k" * 32, "is not http(s)://HOST[:PORT]"),
        (["--gpu-url", "https://gpu.example.edu"], "a:" + "k" * 32 + "\nb:" + "j" * 32, "holds 2 tokens"),
        (["--gpu-url", "https://gpu.example.edu"], "secret", "a token is at least 16 characters"),
    ],
)
def test_a_gpu_service_needs_a_url_and_the_one_token(course_root, tmp_path, options, tokens, words):
    if tokens is not None:
        (tmp_path / "tokens").write_text(tokens)
        options = [*options, "--gpu-token-file", tmp_path / "tokens"]
    outcome = build(course_root, tmp_path / "autograder.zip", "vec", *options)
    assert outcome.exit_code != 0 and words in outcome.output, outcome.output
    assert not (tmp_path / "autograder.zip").exists()
