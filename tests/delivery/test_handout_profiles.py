"""Each handout ends with what ``autograder profile`` shows for its reference, kept current, and
never a line of the reference's source (``autograder/delivery/handout_profiles.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from autograder.cli import main
from autograder.course.authoring import solution_regions
from autograder.delivery.handout_profiles import BEGIN, END

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_every_handouts_profile_block_is_what_its_reference_gives_now():
    outcome = run("handout-profiles", "--check", "--course", ROOT)
    assert outcome.exit_code == 0, outcome.output


def test_the_block_shows_the_ledger_and_occupancy_and_no_line_of_the_solution():
    for readme in sorted(ROOT.glob("assignments/*/README.md")):
        text = readme.read_text()
        block = text[text.index(BEGIN) : text.index(END)]
        assert "Per kernel, beside the reference kernel" in block and "Occupancy on H100/H200" in block
        reference = (ROOT / f"reference/{readme.parent.name}.cu").read_text()
        for region in solution_regions(reference):
            for line in (line.strip() for line in region.splitlines()):
                assert len(line) < 12 or line not in block, f"{readme}: {line}"


def test_a_stale_block_is_named_and_rewritten(tmp_path):
    course = tmp_path / "course"
    for part in ("assignments", "reference", "starter", "rubric.yaml"):
        source = ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, course / part)
    readme = course / "assignments/vector_add/README.md"
    readme.write_text(readme.read_text().replace("2 * n = ", "2 * n = 9"))
    outcome = run("handout-profiles", "--check", "vector_add", "--course", course)
    assert outcome.exit_code == 1 and "assignments/vector_add/README.md" in outcome.output
    assert run("handout-profiles", "vector_add", "--course", course).exit_code == 0
    assert run("handout-profiles", "--check", "vector_add", "--course", course).exit_code == 0
