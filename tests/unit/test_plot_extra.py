"""``profile --plot`` needs matplotlib only: its own ``plot`` extra, which ``batch`` includes, and a
missing matplotlib names that extra (not the batch one, Ray and all)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pytest

from autograder import cli
from autograder.profile import roofline
from autograder.profile.kernel_profile import Roofline

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_plot_extra_is_matplotlib_alone_and_batch_includes_it():
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert [name.split(">=")[0] for name in extras["plot"]] == ["matplotlib"]
    assert "cuda-autograder[plot]" in extras["batch"]


def test_a_missing_matplotlib_names_the_plot_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` raises ImportError
    drawn = Roofline("vector_add", (roofline.point("student", {"flops": 4, "global_load_sectors": 1}),))
    with pytest.raises(click.ClickException) as raised:
        cli.profiling.plot_roofline(drawn, "sm_90", tmp_path / "roofline.svg")
    assert "pip install 'cuda-autograder[plot]'" in raised.value.message
    assert "[batch]" not in raised.value.message
