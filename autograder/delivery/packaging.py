"""A course cut down to some assignments, written as a folder or as a zip of fixed bytes.

What ``autograder gradescope`` (the grading machine's upload) and ``autograder handout``
(the students' copy) share: the grader's own source files, an assignment's folder, the
rubric limited to the named assignments, and the writing. A zip's entries are sorted and
dated 1980-01-01 with fixed modes, so two builds of the same files are the same bytes.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path

import yaml

from autograder.course.folder import Course
from autograder.course.rubric import load_rubric
from autograder.errors import AutograderError

# the checkout this package was installed from: the grader's files, and a course beside them
CHECKOUT = Path(__file__).resolve().parents[2]
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip holds
# caches, and what `pip install .` leaves in the folder it installs from
_LEFT_OUT = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache", "build"})

Entries = dict[str, tuple[Path, int]]  # name in the package -> (file on disk, mode)
Contents = dict[str, tuple[bytes, int]]  # name in the package -> (bytes, mode)


class BuildError(AutograderError):
    """The package cannot be built; the message says what is missing."""


def in_rubric_order(course: Course, names: list[str]) -> list[str]:
    """``names`` (known assignments of ``course``) once each, in the rubric's order."""
    return [name for name in course.rubric.assignments if name in names]


def grader_package(checkout: Path = CHECKOUT) -> Entries:
    """The grader's source that ``pip install`` builds: ``autograder/`` and ``pyproject.toml``."""
    return {"pyproject.toml": (checkout / "pyproject.toml", 0o644)} | tree(
        checkout / "autograder", "autograder"
    )


def tree(folder: Path, prefix: str) -> Entries:
    """The files under ``folder`` by their name in the package: no hidden files, no links, no caches
    and none of the ``build/`` and ``*.egg-info/`` that ``pip install .`` leaves behind."""
    found = {}
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not _left_out(d)]
        for name in files:
            path = Path(parent) / name
            if name.startswith(".") or name.endswith((".pyc", ".pyo")) or path.is_symlink():
                continue
            found[f"{prefix}/{path.relative_to(folder).as_posix()}"] = (path, 0o644)
    return found


def _left_out(folder_name: str) -> bool:
    return folder_name in _LEFT_OUT or folder_name.startswith(".") or folder_name.endswith(".egg-info")


def read(entries: Entries) -> Contents:
    """The entries' bytes; a BuildError naming every file that is missing."""
    missing = sorted(str(path) for path, _ in entries.values() if not path.is_file())
    if missing:
        raise BuildError(
            f"cannot build it, these files are missing: {', '.join(missing)} (the grader's own files "
            "come from its checkout: run the command where it was installed with pip install -e)"
        )
    return {name: (path.read_bytes(), mode) for name, (path, mode) in entries.items()}


def rubric_of(course: Course, names: list[str], command: str) -> str:
    """``rubric.yaml`` with only ``names`` under ``assignments`` (its other keys, its items' order kept)."""
    rubric = yaml.safe_load(course.rubric.path.read_text(encoding="utf-8"))
    rubric["assignments"] = {name: rubric["assignments"][name] for name in names}
    header = (
        f"# {course.rubric.path.name} for {', '.join(names)}, written by `autograder {command}` "
        "(format: docs/design.md)\n"
    )
    text = header + yaml.safe_dump(rubric, sort_keys=False, default_flow_style=None, width=110)
    with tempfile.TemporaryDirectory() as scratch:  # it must load as the grader will load it
        path = Path(scratch) / "rubric.yaml"
        path.write_text(text, encoding="utf-8")
        load_rubric(path, {name: course.specs[name].cases for name in names})
    return text


def write(out: Path, contents: Contents) -> None:
    """A zip when ``out`` ends in ``.zip``, else a folder (which must not exist yet)."""
    if out.suffix.lower() == ".zip":
        write_zip(out, contents)
    else:
        write_folder(out, contents)


def write_zip(out: Path, contents: Contents) -> None:
    """Sorted entries, a fixed date and fixed modes: the same files give the same bytes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "w") as archive:
        for name in sorted(contents):
            content, mode = contents[name]
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.create_system = 3  # Unix, so that the modes below are read
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content, compresslevel=9)
    partial.replace(out)


def write_folder(out: Path, contents: Contents) -> None:
    """The files under a new folder ``out``, written in a sibling first so no half folder is left."""
    if out.exists():
        raise BuildError(f"{out} already exists: remove it or choose another --out")
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    for name, (content, mode) in contents.items():
        path = partial / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)
    partial.replace(out)
