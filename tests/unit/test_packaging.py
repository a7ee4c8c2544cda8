"""What the handout and the Gradescope zip collect: never what ``pip install .`` leaves behind.

``pip install .`` (a student's in the handout, an instructor's in a checkout, setup.sh's in the
zip's source) writes ``build/`` and ``<project>.egg-info/`` into the folder it installs from;
neither belongs in a package built from that folder.
"""

from __future__ import annotations

import zipfile

from autograder.delivery import gradescope_zip, handout

from .conftest import write

PIP_LEFTOVERS = ("build/lib/autograder/cli.py", "cuda_autograder.egg-info/PKG-INFO", "x.egg-info/SOURCES.txt")


def fake_checkout(root):
    """A grader checkout holding the files the packages take, and pip's leftovers beside them."""
    for name in ("pyproject.toml", "README.md", "setup.sh", "run_autograder", "autograder/__init__.py"):
        write(root / name, "# the grader\n")
    for leftover in PIP_LEFTOVERS:
        write(root / leftover, "left by pip\n")
        write(root / "autograder" / leftover, "left by pip\n")
    return root


def test_neither_package_holds_pips_build_or_egg_info(course, course_root, backends, tmp_path):
    checkout = fake_checkout(tmp_path / "checkout")
    for leftover in PIP_LEFTOVERS:
        write(course_root / "assignments/vec" / leftover, "left by pip\n")
    gradescope_zip.build(course, ["vec"], tmp_path / "autograder.zip", checkout)
    handout.build(course, ["vec"], tmp_path / "handout.zip", backends, checkout)
    for package in ("autograder.zip", "handout.zip"):
        with zipfile.ZipFile(tmp_path / package) as archive:
            names = archive.namelist()
        assert "autograder/__init__.py" in names and "assignments/vec/spec.py" in names
        left = [n for n in names if "/build/" in f"/{n}" or ".egg-info/" in n]
        assert not left, f"{package} holds pip's leftovers: {left}"
