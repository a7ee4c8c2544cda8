"""The log of ``autograder batch`` (``autograder/delivery/logs.py``; the service's: test_serve.py)."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from click.testing import CliRunner

from autograder import cli
from autograder.contract import BackendError
from autograder.delivery import batch

from .conftest import write

REFUSED = "'../../escaped':\n  :submitters: []\n"  # an export entry that is refused, never graded


@pytest.mark.parametrize(("level", "shown"), [("INFO", True), ("WARNING", False)])
def test_batch_logs_its_plan_at_info(course_root, tmp_path, monkeypatch, caplog, level, shown):
    caplog.set_level(logging.INFO)  # restored after the test; the option sets it meanwhile
    monkeypatch.setattr(batch, "reference_ledger", lambda course, names: {})
    write(tmp_path / "export/submission_metadata.yml", REFUSED)
    args = ["batch", str(tmp_path / "export"), "--out", str(tmp_path / "out"), "--course", str(course_root)]
    outcome = CliRunner().invoke(cli.main, [*args, "--log-level", level])
    assert outcome.exit_code == 0, outcome.output
    plans = [r for r in caplog.records if r.name == "autograder.delivery.batch"]
    assert [r.getMessage() for r in plans] == ["0 to grade, 1 current or refused (not graded again)"] * shown
    assert "1 refused" in outcome.output  # the summary is printed whatever the level


def test_a_reference_the_emulator_cannot_count_is_a_warning_not_a_silence(course, monkeypatch, caplog):
    def refused(*args):
        raise BackendError("no NVRTC found")

    monkeypatch.setattr(batch, "select_backend", refused)
    assert batch.reference_ledger(course, ["vec"]) == {}
    [record] = [r for r in caplog.records if r.name == "autograder.delivery.batch"]
    assert record.levelno == logging.WARNING
    assert record.getMessage().endswith("could not count the reference: no NVRTC found")


SET_UP = """
import io, logging, sys
from autograder.delivery import logs
logs.configure("INFO")
sys.stderr = io.StringIO()  # as rich's progress bar swaps it while drawn
logging.getLogger("autograder.delivery.batch").info("shown above the bar")
logging.getLogger("autograder.delivery.batch").debug("below the level")
print(sys.stderr.getvalue(), end="")
"""


def test_the_log_goes_to_stderr_as_it_is_at_each_line():
    """Not to the stream stderr was when logging was set up: that would tear a drawn progress bar."""
    run = subprocess.run(
        [sys.executable, "-c", SET_UP], capture_output=True, text=True, timeout=60, check=True
    )
    assert run.stdout.endswith(" INFO autograder.delivery.batch: shown above the bar\n"), run.stdout
    assert "below the level" not in run.stdout and run.stderr == ""
