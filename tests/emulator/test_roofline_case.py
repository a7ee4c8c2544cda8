"""The roofline is drawn at a case that says something (``ledger.roofline_case``): the largest
graded case with the timed case's tiles, not the first safety case (n=1), where one thread does
all the work and every kernel sits at the same point; the picture's title names the case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.backends.emulator import EmulatorBackend
from autograder.cli import main
from autograder.course.folder import read_course
from autograder.course.spec import load_specs
from autograder.grading import ledger
from autograder.profile import roofline

ROOT = Path(__file__).resolve().parents[2]
SPECS = load_specs(ROOT)
CORRECT = (ROOT / "reference/vector_add.cu").read_text()
UNGUARDED = CORRECT.replace("if (i < n) c[i]", "c[i]")


@pytest.mark.parametrize(
    ("name", "case"),
    [
        ("vector_add", {"n": 1_000_003}),  # ragged: the last block's guard is taken
        ("window_sum", {"T": 256, "n": 1_000_003}),  # the timed block of 256, not the first safety T=32
        ("matmul_block_tile", {"L": 128, "V": 8, "S": 8, "M": 256, "N": 256, "K": 64}),  # the timed tiles
    ],
)
def test_the_roofline_is_drawn_at_the_largest_graded_case_with_the_timed_tiles(name, case):
    assert ledger.roofline_case(SPECS[name])[1] == case != ledger.first_case(SPECS[name])[1]


def drawn(tmp_path: Path, source: str) -> tuple[dict, str]:
    """``profile --plot --json`` of a vector_add ``source``: the case the roofline shows, and the picture."""
    kernel, picture = tmp_path / "vector_add.cu", tmp_path / "roofline.svg"
    kernel.write_text(source)
    outcome = CliRunner().invoke(
        main, ["profile", str(kernel), "--assignment", "vector_add", "--plot", str(picture), "--json"]
    )
    assert outcome.exit_code in (0, 1), outcome.output
    return json.loads(outcome.stdout)["cases"][-1], picture.read_text()  # stdout: the JSON alone


def test_a_correct_kernel_and_one_missing_its_guard_are_told_apart_at_the_roofline_case(tmp_path):
    assert UNGUARDED != CORRECT
    correct, picture = drawn(tmp_path, CORRECT)
    unguarded, _ = drawn(tmp_path, UNGUARDED)
    assert correct["case"] == unguarded["case"] == {"n": 1_000_003}
    assert "vector_add at n=1000003" in picture  # the title names the case
    assert not correct["findings"] and unguarded["findings"]
    ours, theirs = (roofline.point("student", run["totals"]) for run in (correct, unguarded))
    assert ours.flops == 1_000_003 < theirs.flops == 1_000_192  # the unguarded last block adds
    assert ours.intensity != theirs.intensity
    assert ours.intensity == pytest.approx(1 / 12, rel=1e-3)  # 1 flop a 12 bytes, as timed (n=1: 1/96)


def test_the_class_reports_rooflines_use_the_same_case():
    entry = ledger.class_ledger(read_course(ROOT), ["vector_add"], EmulatorBackend())["vector_add"]
    assert entry["case"] == {"n": 1_000_003} and entry["reference"]["flops"] == 1_000_003
