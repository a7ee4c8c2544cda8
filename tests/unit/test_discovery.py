"""Forgiving submission discovery (autograder/course/discovery.py): what students upload is found.

Each rule is shown through the real pipeline on the fake course of conftest.py (assignments
``vec`` and ``grid2d``, whose kernels are named like them). A fake kernel is Python, so the
line that makes a file "define the kernel" is a Python comment holding the CUDA declaration.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder import cli
from autograder.course import discovery
from autograder.grading import pipeline
from autograder.grading.results import build_results

from .conftest import write
from .fake_backend import FakeBackend, open_fake_backends

DECLARES_VEC = "# __global__ void vec(const float* a, const float* b, float* c, int n)\n"


def grade(course, backends, folder, **kwargs):
    return pipeline.grade_submission(folder, course, backends, seed=1, **kwargs)


def by_assignment(graded):
    totals: dict[str, float] = {}
    for r in graded.items:
        totals[r.item.assignment] = totals.get(r.item.assignment, 0) + r.score
    return totals


def student_text(graded, course) -> str:
    return json.dumps(build_results(graded, course.rubric))


@pytest.fixture
def reference(course_root):
    return {name: (course_root / f"reference/{name}.cu").read_text() for name in ("vec", "grid2d")}


def test_kernels_in_nested_folders_are_found(course, backends, tmp_path, reference):
    folder = tmp_path / "submission"
    write(folder / "hw1/src/vec.cu", reference["vec"])
    write(folder / "hw1/grid2d.cu", reference["grid2d"])
    graded = grade(course, backends, folder)
    assert by_assignment(graded) == {"vec": 7, "grid2d": 3}  # vec: 8 points, performance needs a GPU
    assert any("hw1/src/vec.cu" in note for note in graded.notes)  # the student is told which file


@pytest.mark.parametrize(
    ("vec_name", "grid_name"),
    [("VEC.cu", "Grid2D.cu"), ("Vec.CU", "grid_2d.cu"), ("v_e_c.cu", "GRID_2D.cu")],
)
def test_names_match_ignoring_case_and_underscores(
    course, backends, tmp_path, reference, vec_name, grid_name
):
    folder = tmp_path / "submission"
    write(folder / vec_name, reference["vec"])
    write(folder / grid_name, reference["grid2d"])
    assert by_assignment(grade(course, backends, folder)) == {"vec": 7, "grid2d": 3}


def test_a_file_that_defines_the_kernel_is_found_whatever_its_name(course, backends, tmp_path, reference):
    folder = tmp_path / "submission"
    write(folder / "my_solution.cu", DECLARES_VEC + reference["vec"])
    write(folder / "notes.txt", "__global__ void grid2d(float* x)\n")  # not a .cu file
    graded = grade(course, backends, folder)
    assert [r.item.assignment for r in graded.items] == ["vec"] * 6
    assert by_assignment(graded) == {"vec": 7}


def test_a_kernel_in_a_comment_or_a_string_defines_nothing(tmp_path):
    folder = tmp_path / "submission"
    write(folder / "a.cu", "// __global__ void vec(float* a) {}\n")
    write(folder / "b.cu", '/* __global__ void vec(\n*/ const char* s = "__global__ void vec(";\n')
    write(folder / "c.cu", "__global__ void vector(float* a) {}\n__global__ void vec_2(float* a) {}\n")
    with discovery.opened(folder, {"vec": "vec"}) as found:
        path, problem = found.locate("vec")
    assert path is None and "vec.cu was not submitted" in problem


def test_the_kernel_rule_reads_through_launch_bounds_and_line_breaks(tmp_path):
    folder = tmp_path / "submission"
    write(folder / "k.cu", 'extern "C" __global__ void\n__launch_bounds__(256)\nvec (float* a) {}\n')
    with discovery.opened(folder, {"vec": "vec"}) as found:
        path, problem = found.locate("vec")
    assert problem is None and path.name == "k.cu"


def test_a_file_named_for_one_assignment_is_not_taken_for_another(tmp_path):
    folder = tmp_path / "submission"
    write(folder / "grid2d.cu", DECLARES_VEC)  # a helper kernel inside grid2d's file
    with discovery.opened(folder, {"vec": "vec", "grid2d": "grid2d"}) as found:
        assert found.locate("vec")[0] is None and found.locate("grid2d")[0].name == "grid2d.cu"


def test_two_candidates_are_named_by_their_paths_in_the_submission(course, backends, tmp_path, reference):
    folder = tmp_path / "submission"
    write(folder / "old/vec.cu", reference["vec"])
    write(folder / "new/Vec.cu", reference["vec"])
    graded = grade(course, backends, folder)
    vec = [r for r in graded.items if r.item.assignment == "vec"]
    assert len(vec) == 6 and all(r.score == 0 for r in vec)
    assert "new/Vec.cu" in vec[0].output and "old/vec.cu" in vec[0].output
    assert str(tmp_path) not in student_text(graded, course)


def test_two_files_defining_the_kernel_are_two_candidates(tmp_path):
    folder = tmp_path / "submission"
    write(folder / "a.cu", DECLARES_VEC)
    write(folder / "b/c.cu", DECLARES_VEC)
    with discovery.opened(folder, {"vec": "vec"}) as found:
        path, problem = found.locate("vec")
    assert path is None and "a.cu" in problem and "b/c.cu" in problem and str(tmp_path) not in problem


def test_when_nothing_is_found_the_message_lists_what_was_submitted(course, backends, tmp_path):
    folder = tmp_path / "submission"
    write(folder / "README.txt", "hi")
    write(folder / "src/vector.cu", "__global__ void vector(float* a) {}\n")
    graded = grade(course, backends, folder)
    text = student_text(graded, course)
    assert "vec.cu was not submitted" in graded.items[0].output
    assert "README.txt" in graded.items[0].output and "src/vector.cu" in graded.items[0].output
    assert "expected one of: vec.cu, grid2d.cu" in graded.notes[0]
    assert str(tmp_path) not in text


def test_the_list_of_what_was_submitted_is_capped(tmp_path):
    folder = tmp_path / "submission"
    for i in range(500):
        write(folder / f"junk/file_{i:03}_{'x' * 40}.txt", "")
    with discovery.opened(folder, {"vec": "vec"}) as found:
        _, problem = found.locate("vec")
    assert len(problem) < 1200 and "more" in problem and "junk/file_000_" in problem


def test_an_empty_submission_says_so(tmp_path):
    (tmp_path / "submission").mkdir()
    with discovery.opened(tmp_path / "submission", {"vec": "vec"}) as found:
        _, problem = found.locate("vec")
    assert "vec.cu was not submitted" in problem and "empty" in problem


def test_hidden_files_and_macos_litter_are_not_candidates(tmp_path):
    folder = tmp_path / "submission"
    write(folder / "vec.cu", DECLARES_VEC)
    write(folder / "__MACOSX/._vec.cu", DECLARES_VEC)
    write(folder / ".git/vec.cu", DECLARES_VEC)
    with discovery.opened(folder, {"vec": "vec"}) as found:
        path, problem = found.locate("vec")
    assert problem is None and path == folder / "vec.cu"


# -- symbolic links are never followed -------------------------------------------------------


def test_a_symlinked_kernel_is_refused_by_the_source_policy(course, backends, tmp_path, course_root):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "vec.cu").symlink_to(course_root / "reference/vec.cu")
    graded = grade(course, backends, folder)
    vec = [r for r in graded.items if r.item.assignment == "vec"]
    assert all(r.score == 0 for r in vec) and "vec.cu is a symbolic link" in vec[0].output


def test_a_symlinked_folder_is_not_entered_and_a_symlinked_file_not_read(tmp_path, course_root):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "refs").symlink_to(course_root / "reference", target_is_directory=True)
    write(tmp_path / "outside.cu", DECLARES_VEC)
    (folder / "mine.cu").symlink_to(tmp_path / "outside.cu")
    with discovery.opened(folder, {"vec": "vec", "grid2d": "grid2d"}) as found:
        assert found.locate("grid2d")[0] is None  # refs/grid2d.cu was not reached
        path, problem = found.locate("vec")  # mine.cu's target was not read
    assert path is None and "not submitted" in problem


# -- one uploaded .zip ----------------------------------------------------------------------


def make_zip(path: Path, entries: dict[str, bytes], symlinks: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        for name in symlinks:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/autograder/source/reference/vec.cu")
    return path


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Where discovery unpacks (tempfile's folder), to show it is emptied afterwards."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_one_uploaded_zip_is_unpacked(course, backends, tmp_path, reference, private_tmp):
    folder = tmp_path / "submission"
    make_zip(
        folder / "hw1.zip",
        {
            "hw1/": b"",
            "hw1/src/Vec.cu": reference["vec"].encode(),
            "hw1/grid2d.cu": reference["grid2d"].encode(),
        },
    )
    graded = grade(course, backends, folder)
    assert by_assignment(graded) == {"vec": 7, "grid2d": 3}
    assert any("hw1.zip/hw1/src/Vec.cu" in note for note in graded.notes)
    assert list(private_tmp.iterdir()) == []  # the unpacked copy is gone


def test_a_zip_given_as_the_submission_is_unpacked(course, backends, tmp_path, reference, private_tmp):
    archive = make_zip(tmp_path / "upload.zip", {"vec.cu": reference["vec"].encode()})
    assert by_assignment(grade(course, backends, archive)) == {"vec": 7}


def test_two_zips_are_not_unpacked(tmp_path, reference):
    folder = tmp_path / "submission"
    make_zip(folder / "a.zip", {"vec.cu": DECLARES_VEC.encode()})
    make_zip(folder / "b.zip", {"vec.cu": DECLARES_VEC.encode()})
    with discovery.opened(folder, {"vec": "vec"}) as found:
        assert found.locate("vec")[0] is None
    assert any("a.zip" in note and "b.zip" in note for note in found.notes)


BOMB = b" " * (discovery.MAX_UNPACKED_BYTES + 1)


@pytest.mark.parametrize(
    ("entries", "symlinks", "reason"),
    [
        ({"/abs/vec.cu": b"x"}, (), "absolute"),
        ({"C:\\vec.cu": b"x"}, (), "absolute"),
        ({"../vec.cu": b"x"}, (), "'..'"),
        ({"hw/../../vec.cu": b"x"}, (), "'..'"),
        ({"hw\\..\\..\\vec.cu": b"x"}, (), "'..'"),
        ({"vec.cu": b"x"}, ("link.cu",), "symbolic link"),
        ({"vec.cu": BOMB}, (), "larger than"),
        ({f"f{i}.txt": b"" for i in range(discovery.MAX_ENTRIES + 1)}, (), "more than"),
    ],
    ids=["absolute", "drive", "dotdot", "nested-dotdot", "backslash-dotdot", "symlink", "bomb", "entries"],
)
def test_an_unsafe_zip_is_refused_whole(tmp_path, private_tmp, entries, symlinks, reason):
    folder = tmp_path / "submission"
    make_zip(folder / "hw.zip", {"ok/vec.cu": DECLARES_VEC.encode(), **entries}, symlinks)
    with discovery.opened(folder, {"vec": "vec"}) as found:
        path, problem = found.locate("vec")
        assert path is None and "not submitted" in problem
    note = " ".join(found.notes)
    assert "hw.zip was not unpacked" in note and reason in note and str(tmp_path) not in note
    assert list(private_tmp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["submission", "tmp"]  # nothing written beside


def test_a_zip_whose_entries_lie_about_their_size_is_refused(tmp_path, private_tmp):
    folder = tmp_path / "submission"
    archive = make_zip(folder / "hw.zip", {"vec.cu": BOMB})
    data = bytearray(archive.read_bytes())
    declared = len(BOMB).to_bytes(4, "little")
    # the central directory's and the local header's uncompressed size: say 10 bytes
    data[:] = data.replace(declared, (10).to_bytes(4, "little"))
    archive.write_bytes(bytes(data))
    with discovery.opened(folder, {"vec": "vec"}) as found:
        assert found.locate("vec")[0] is None
    assert "hw.zip was not unpacked" in " ".join(found.notes)
    assert list(private_tmp.iterdir()) == []


def test_a_file_that_is_no_zip_is_named(tmp_path):
    folder = tmp_path / "submission"
    write(folder / "hw.zip", "not a zip")
    with discovery.opened(folder, {"vec": "vec"}) as found:
        assert found.locate("vec")[0] is None
    assert any("hw.zip was not unpacked" in note for note in found.notes)


# -- `autograder check` accepts any file name ------------------------------------------------


@pytest.fixture
def fake_cli(monkeypatch):
    monkeypatch.setattr(cli.shared, "open_backends", open_fake_backends)
    monkeypatch.setattr(
        cli.shared, "select_backend", lambda name, compile_s=60, emulator_mb=None: FakeBackend(name)
    )


def run(*args):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


def test_check_grades_a_file_of_any_name_as_the_assignment_named(fake_cli, course_root, tmp_path):
    mine = write(tmp_path / "my attempt (2).cu", (course_root / "reference/vec.cu").read_text())
    outcome = run("check", mine, "--assignment", "vec", "--course", course_root)
    assert outcome.exit_code == 0, outcome.output
    assert "vec correctness (aligned)" in outcome.output


def test_check_knows_the_assignment_from_a_forgiving_file_name(fake_cli, course_root, tmp_path):
    mine = write(tmp_path / "Grid_2D.cu", (course_root / "reference/grid2d.cu").read_text())
    outcome = run("check", mine, "--course", course_root)
    assert outcome.exit_code == 0 and "grid2d correctness" in outcome.output, outcome.output


def test_check_names_an_unknown_assignment(fake_cli, course_root, tmp_path):
    mine = write(tmp_path / "mine.cu", "")
    outcome = run("check", mine, "--assignment", "vector", "--course", course_root)
    assert outcome.exit_code == 2 and "unknown assignment 'vector'" in outcome.output


def test_check_refuses_a_symlinked_kernel(fake_cli, course_root, tmp_path):
    (tmp_path / "mine.cu").symlink_to(course_root / "reference/vec.cu")
    outcome = run("check", tmp_path / "mine.cu", "--assignment", "vec", "--course", course_root)
    assert outcome.exit_code == 1 and "mine.cu is a symbolic link" in outcome.output


def test_profile_finds_a_nested_kernel(fake_cli, course_root, tmp_path, monkeypatch):
    monkeypatch.setattr(
        cli.profiling, "profile_table", lambda result, source, filename: f"profiled {filename}"
    )
    write(tmp_path / "submission/src/vec.cu", (course_root / "reference/vec.cu").read_text())
    outcome = run("profile", tmp_path / "submission", "--assignment", "vec", "--course", course_root)
    assert outcome.exit_code == 0 and "profiled vec.cu" in outcome.output, outcome.output


def test_no_file_of_the_grading_machine_is_left_behind(course, backends, tmp_path, reference, private_tmp):
    folder = tmp_path / "submission"
    make_zip(folder / "hw1.zip", {"vec.cu": reference["vec"].encode()})
    grade(course, backends, folder)
    assert list(private_tmp.iterdir()) == [] and os.listdir(folder) == ["hw1.zip"]
