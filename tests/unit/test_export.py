"""Reading a class that may be crafted (``autograder.delivery.export``): folder names that are paths,
YAML that expands without end, and zips that unpack to far more than they weigh."""

from __future__ import annotations

import json
import os
import stat
import time
import zipfile

import pytest

from autograder.course.discovery import MAX_ZIP_BYTES
from autograder.course.policy import MAX_SOURCE_BYTES
from autograder.delivery import export
from autograder.delivery.export import BatchError, Limits

from .conftest import write

KERNEL = "__global__ void vec(float* x) {}\n"


def metadata(*names: str) -> str:
    return "".join(f"{json.dumps(name)}:\n  :submitters:\n  - :name: Ada\n" for name in names)


def test_a_folder_name_that_is_a_path_is_refused_and_the_rest_of_the_class_is_read(tmp_path):
    """A crafted ``submission_metadata.yml`` named folders outside the export (and outside DIR)."""
    outside = tmp_path / "outside"
    write(outside / "vec.cu", KERNEL)
    crafted = [str(outside), "../outside", "sub/../../outside", "report", "class.json", "x[/]", "a\nb"]
    root = tmp_path / "export"
    write(root / "submission_metadata.yml", metadata("submission_1", *crafted))
    write(root / "submission_1/vec.cu", KERNEL)
    write(root / "sub/vec.cu", KERNEL)
    write(root / "report/vec.cu", KERNEL)
    submissions = export.read_class(root, tmp_path / "scratch")
    graded = [s for s in submissions if not s.refused]
    assert [(s.id, s.folder) for s in graded] == [("submission_1", (root / "submission_1").resolve())]
    refused = [s for s in submissions if s.refused]
    assert len(refused) == len(crafted)
    assert all("/" not in s.id or s.id.startswith("'") for s in refused)  # shown quoted, never a folder
    assert all("[" not in s.id and "\n" not in s.id for s in refused)  # nothing a terminal interprets
    reasons = {s.id: s.refused.split(";")[0].removeprefix("its folder name ") for s in refused}
    assert reasons["'../outside'"] == reasons["'x\\x5b/\\x5d'"] == "is a path, not one folder name"
    assert reasons["'a\\nb'"] == "holds a control character or a bracket"
    assert reasons["'class.json'"] == reasons["'report'"] != reasons["'../outside'"]


def test_a_plain_folder_named_like_a_file_of_dir_or_linked_elsewhere_is_refused(tmp_path):
    write(tmp_path / "class/report/vec.cu", KERNEL)
    write(tmp_path / "class/amy/vec.cu", KERNEL)
    write(tmp_path / "ta/private.cu", KERNEL)
    (tmp_path / "class/bob").symlink_to(tmp_path / "ta")
    submissions = export.read_class(tmp_path / "class", tmp_path / "scratch")
    assert [(s.id, s.refused) for s in submissions] == [
        ("amy", None),
        ("'bob'", "its folder is a symbolic link"),
        ("'report'", export.name_problem("report")),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("submission_1: &a {submitters: [*a]}\n", "uses a YAML alias"),  # a RecursionError before
        (  # the billion laughs: 9**9 lists, minutes and gigabytes before
            "a: &a [x,x,x,x,x,x,x,x,x]\n"
            + "".join(
                f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            )
            + "submission_1: {submitters: *i}\n",
            "uses a YAML alias",
        ),
        ("[" * 50_000, "nests deeper than"),  # past Python's recursion limit
        ("- [unclosed", "cannot be read: "),
        (b"\xff\xfe", "is not UTF-8 text"),
    ],
    ids=["self-reference", "alias-bomb", "deep", "syntax", "bytes"],
)
def test_bad_metadata_is_one_line_at_once(tmp_path, text, says):
    path = tmp_path / "export/submission_metadata.yml"
    path.parent.mkdir(parents=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    started = time.monotonic()
    with pytest.raises(BatchError) as raised:
        export.read_class(tmp_path / "export", tmp_path / "scratch")
    assert time.monotonic() - started < 2
    message = str(raised.value)
    assert says in message and "\n" not in message and str(tmp_path) not in message


def make_zip(path, entries: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)


def test_an_export_bomb_is_never_unpacked_and_what_was_left_out_is_said(tmp_path):
    archive = tmp_path / "export.zip"
    random_bytes = os.urandom(MAX_SOURCE_BYTES + 4096)  # incompressible: cut, not a bomb
    make_zip(
        archive,
        {
            "export/submission_metadata.yml": metadata("submission_1").encode(),
            "export/submission_1/vec.cu": KERNEL.encode(),
            "export/submission_1/notes.bin": bytes(64 << 20),  # grading reads only its name
            "export/submission_1/bomb.cu": bytes(8 << 20),  # packed about 1000 times
            "export/submission_1/huge.cu": random_bytes,
            "export/../escape.cu": KERNEL.encode(),
        },
    )
    assert archive.stat().st_size < 2 * MAX_SOURCE_BYTES
    (submission,) = export.read_class(archive, tmp_path / "scratch")
    unpacked = sum(p.stat().st_size for p in (tmp_path / "scratch").rglob("*") if p.is_file())
    assert unpacked < 2 * MAX_SOURCE_BYTES
    assert not (tmp_path / "escape.cu").exists()
    files, cut = export.submission_files(submission.folder)
    assert files["vec.cu"] == KERNEL.encode() and files["notes.bin"] == b"" and files["bomb.cu"] == b""
    assert files["huge.cu"] == random_bytes[: MAX_SOURCE_BYTES + 1]  # grade still says it is too large
    assert [line.split(":")[0] for line in submission.skipped] == ["bomb.cu"]
    assert "packed" in submission.skipped[0] and [line.split(":")[0] for line in cut] == ["huge.cu"]


def test_unsafe_entries_of_an_export_are_left_out_and_said_and_the_rest_unpacked(tmp_path):
    archive = tmp_path / "export.zip"
    make_zip(
        archive,
        {
            "export/submission_metadata.yml": metadata("submission_1").encode(),
            "export/submission_1/vec.cu": KERNEL.encode(),
            "/abs.cu": KERNEL.encode(),
            "C:\\drive.cu": KERNEL.encode(),
        },
    )
    with zipfile.ZipFile(archive, "a") as z:  # a symbolic link to a file of the grading machine
        link = zipfile.ZipInfo("export/submission_1/link.cu")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, "/etc/passwd")
    (submission,) = export.read_class(archive, tmp_path / "scratch")
    assert sorted(p.name for p in submission.folder.iterdir()) == ["vec.cu"]
    assert submission.skipped == (
        "link.cu: entry 'export/submission_1/link.cu' is a symbolic link, not unpacked",
    )
    assert not any(p.name in ("abs.cu", "drive.cu") for p in (tmp_path / "scratch").rglob("*"))


@pytest.mark.parametrize(
    ("limits", "says"),
    [(Limits(files=3), "more than 3 entries"), (Limits(total_bytes=100), "more than 0 MiB")],
)
def test_an_export_past_its_limits_is_refused_whole(tmp_path, limits, says):
    archive = tmp_path / "export.zip"
    entries = {f"submission_{k}/vec.cu": KERNEL.encode() * 2 for k in range(4)}
    make_zip(archive, entries)
    with pytest.raises(BatchError, match=says):
        export.read_class(archive, tmp_path / "scratch", limits)


def test_an_uploaded_zip_is_taken_up_to_what_grading_accepts(tmp_path):
    write(tmp_path / "class/amy/hw.zip", "not really a zip")
    write(tmp_path / "class/amy/README.md", "read me")
    files, cut = export.submission_files(tmp_path / "class/amy")
    assert files == {"README.md": b"", "hw.zip": b"not really a zip"} and cut == []
    assert export.read_limit("HW.ZIP") == MAX_ZIP_BYTES + 1
