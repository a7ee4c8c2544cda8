"""Which file of a submission is which assignment's kernel.

Students upload what they have: ``VectorAdd.cu``, ``hw1/src/vector_add.cu``, a ``.zip`` of
their folder. For each assignment, the first of these rules that finds anything decides:

1. a file named like ``<assignment>.cu``, in any folder, the name compared without case and
   without ``_``, ``-`` or spaces (``VectorAdd.cu``, ``vectoradd.CU``, ``src/vector_add.cu``);
2. a ``.cu`` file whose code (comments and strings left out) declares the assignment's kernel,
   ``__global__ ... <spec.kernel>(``, and that rule 1 did not give to another assignment.

One candidate is the assignment's file; two or more is a problem that names them; none is a
problem that lists what was submitted. Every name a student reads is relative to the
submission, never a path of the grading machine. A submission that is one file (``autograder
check FILE``) is the file of whichever assignment is asked for, whatever its name.

One ``.zip`` in the submission (or given as the submission) is unpacked first, into a
temporary folder that lives as long as the ``with`` block: only its ``.cu`` files, and only
when every entry is safe (no absolute path, no ``..``, no link or device, at most
``MAX_ENTRIES`` entries and ``MAX_UNPACKED_BYTES`` in all; otherwise none is, and a note says
why). Its files join the search as ``<zip>/<entry>``.

Symbolic links are never followed: a linked folder is not entered and a linked file is not
read; a linked file named like the assignment is still its candidate, so that the source
policy (``policy.read_source``) refuses it by name. Hidden files and folders (``.git``,
``._x.cu``) and ``__MACOSX`` are left out.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import IO

from autograder.course.policy import MAX_SOURCE_BYTES, code_only
from autograder.errors import AutograderError
from autograder.feedback import LINE_BYTES, capped

MAX_FILES = 10_000  # files looked at in a submission; past that the rest are not
MAX_READ = 100  # .cu files whose text rule 2 reads, at most (each at most policy.MAX_SOURCE_BYTES)
MAX_ENTRIES = 500  # entries of an uploaded .zip
MAX_ZIP_BYTES = 32 << 20  # the .zip itself
MAX_UNPACKED_BYTES = 4 << 20  # its .cu files once unpacked, all together
LISTED = 20  # names shown when nothing was found
_SUFFIX = ".cu"
_IGNORED_FOLDERS = frozenset({"__MACOSX", "__pycache__", "node_modules"})


def name_key(name: str) -> str:
    """What names are compared by: no case, no ``_``, ``-`` or spaces (``VectorAdd`` = ``vector_add``)."""
    return re.sub(r"[\s_-]", "", name).casefold()


class Submission:
    """A submission's files, by their names relative to it; see the module's docstring."""

    def __init__(self, files: dict[str, Path], kernels: Mapping[str, str], single: bool, notes: list[str]):
        self.files = dict(sorted(files.items()))
        self.kernels = dict(kernels)  # assignment -> kernel name
        self.single = single  # the submission is one file, taken for whichever assignment is asked
        self.notes = notes  # for the student: a .zip not unpacked, files not looked at
        self._by_name = {name: [rel for rel in self.files if _named_like(rel, name)] for name in self.kernels}
        self._texts: dict[str, str | None] = {}

    def candidates(self, name: str) -> list[str]:
        """The files that may be assignment ``name``'s (relative names), by the first rule that finds any."""
        if self._by_name[name]:
            return self._by_name[name]
        claimed = {rel for other, found in self._by_name.items() if other != name for rel in found}
        declares = _declaration(self.kernels[name])
        sources = [rel for rel in self.files if rel.lower().endswith(_SUFFIX)][:MAX_READ]
        return [rel for rel in sources if rel not in claimed and declares.search(self._code(rel) or "")]

    def locate(self, name: str) -> tuple[Path | None, str | None]:
        """Assignment ``name``'s file, or why there is none (the sentence the student reads)."""
        found = self.candidates(name)
        if len(found) == 1:
            return self.files[found[0]], None
        if self.single and not found:
            return next(iter(self.files.values())), None
        if found:
            listed = " and ".join(found) if len(found) == 2 else f"{', '.join(found[:LISTED])}{_more(found)}"
            return None, capped(
                f"{len(found)} files could be {name}'s: {listed}; submit only one", LINE_BYTES * 2
            )
        return None, (
            f"{name}.cu was not submitted (no file is named like it, and no .cu file defines "
            f"__global__ {self.kernels[name]}); {self.inventory()}"
        )

    def note(self, name: str) -> str | None:
        """Which file was graded for ``name``, when it is not ``<name>.cu`` at the top."""
        found = self.candidates(name)
        if len(found) == 1 and found[0] != f"{name}{_SUFFIX}" and not self.single:
            return f"{name}: graded {found[0]}"
        return None

    def inventory(self) -> str:
        """What was submitted, in a bounded sentence."""
        if not self.files:
            return "the submission is empty"
        names = list(self.files)
        return capped(f"the submission holds: {', '.join(names[:LISTED])}{_more(names)}", LINE_BYTES * 2)

    def _code(self, rel: str) -> str | None:
        """The file's code without comments and literals; None for a link, a big or a non-UTF-8 file."""
        if rel not in self._texts:
            self._texts[rel] = _read_code(self.files[rel])
        return self._texts[rel]


@contextlib.contextmanager
def opened(submission: Path, kernels: Mapping[str, str]) -> Iterator[Submission]:
    """The submission's files (a folder, one ``.cu`` file, or a ``.zip``), its one ``.zip`` unpacked.

    ``kernels`` maps each assignment of the course to its kernel's name (``spec.kernel``).
    """
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="submission-") as scratch:
        files, zips, single = {}, [], False
        if submission.is_dir():  # the grader's argument; links inside it are never followed
            files = _walk(submission, notes)
            zips = [
                rel for rel, path in files.items() if rel.lower().endswith(".zip") and not path.is_symlink()
            ]
        elif submission.suffix.lower() == ".zip" and submission.is_file():
            files, zips = {submission.name: submission}, [submission.name]
        elif submission.exists() or submission.is_symlink():
            files, single = {submission.name: submission}, True
        if len(zips) == 1:
            files |= _unpacked(files[zips[0]], zips[0], Path(scratch) / "unzipped", notes)
        elif zips:
            notes.append(
                f"{len(zips)} .zip files were submitted ({', '.join(zips[:LISTED])}); none was unpacked: "
                "submit one .zip, or the .cu files themselves"
            )
        yield Submission(files, kernels, single, notes)


def _named_like(rel: str, name: str) -> bool:
    path = PurePosixPath(rel)
    return path.suffix.lower() == _SUFFIX and name_key(path.stem) == name_key(name)


def _declaration(kernel: str) -> re.Pattern[str]:
    """``__global__``, then qualifiers and the return type (no ``;`` or braces), then ``kernel(``."""
    return re.compile(rf"\b__global__\b[^;{{}}]*?(?<![\w$]){re.escape(kernel)}\s*\(")


def _more(names: list[str]) -> str:
    return f" and {len(names) - LISTED} more" if len(names) > LISTED else ""


def _hidden(name: str) -> bool:
    return name.startswith(".") or name in _IGNORED_FOLDERS


def _walk(root: Path, notes: list[str]) -> dict[str, Path]:
    """Every file under ``root`` by its relative name; links listed but never followed or entered."""
    files: dict[str, Path] = {}
    for folder, dirs, names in os.walk(root):  # followlinks=False: a linked folder is not entered
        dirs[:] = sorted(d for d in dirs if not _hidden(d) and not (Path(folder) / d).is_symlink())
        for name in sorted(n for n in names if not _hidden(n)):
            if len(files) == MAX_FILES:
                notes.append(
                    f"the submission holds more than {MAX_FILES} files; only the first were looked at"
                )
                return files
            path = Path(folder) / name
            files[path.relative_to(root).as_posix()] = path
    return files


def _read_code(path: Path) -> str | None:
    try:
        if not stat.S_ISREG(path.lstat().st_mode):  # a link (never followed), a device, a folder
            return None
        with path.open("rb") as file:
            data = file.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:
            return None
        return code_only(data.decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError):
        return None


def _unpacked(archive: Path, rel: str, target: Path, notes: list[str]) -> dict[str, Path]:
    """The ``.cu`` files of ``archive`` unpacked under ``target``, by ``<rel>/<entry>``; {} if unsafe."""
    try:
        if archive.stat().st_size > MAX_ZIP_BYTES:
            raise _Unsafe(f"it is larger than {MAX_ZIP_BYTES >> 20} MiB")
        with zipfile.ZipFile(archive) as opened_zip:
            files, left = {}, MAX_UNPACKED_BYTES
            for parts, info in _safe_entries(opened_zip.infolist()):
                destination = target.joinpath(*parts)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with opened_zip.open(info) as source, destination.open("xb") as sink:
                    left -= _copy(source, sink, left)
                files[f"{rel}/{'/'.join(parts)}"] = destination
            return files
    except _Unsafe as e:
        reason = str(e)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        reason = f"it is not a readable .zip ({e})"
    except (RuntimeError, NotImplementedError) as e:  # encrypted, or a compression zipfile lacks
        reason = f"it could not be read ({e})"
    except (OSError, ValueError) as e:
        reason = f"it could not be unpacked ({getattr(e, 'strerror', None) or type(e).__name__})"
    shutil.rmtree(target, ignore_errors=True)  # what was unpacked before the problem
    notes.append(capped(f"{rel} was not unpacked: {reason}", LINE_BYTES))
    return {}


class _Unsafe(AutograderError):
    """An entry, or the whole, of an uploaded .zip that is not unpacked."""


def entry_parts(info: zipfile.ZipInfo) -> tuple[tuple[str, ...] | None, str | None]:
    """An entry's path within its zip, as parts (None where it has none inside it), and why it is
    not safe to unpack (None when it is): an absolute path, ``..``, a link or special file, or
    encrypted. Shared by a student's uploaded .zip (here) and an instructor's export (``export``)."""
    name = info.filename.replace("\\", "/")  # some Windows tools write backslashes
    shown = capped(repr(info.filename), 200)
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return None, f"entry {shown} is an absolute path"
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        return None, f"entry {shown} leaves the archive ('..')"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return parts, f"entry {shown} is a symbolic link"
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return parts, f"entry {shown} is not a file or a folder"
    if info.flag_bits & 0x1:
        return parts, f"entry {shown} is encrypted"
    return parts, None


def _safe_entries(infos: list[zipfile.ZipInfo]) -> list[tuple[tuple[str, ...], zipfile.ZipInfo]]:
    """The ``.cu`` files to unpack, as path parts; ``_Unsafe`` for any entry that is not safe."""
    if len(infos) > MAX_ENTRIES:
        raise _Unsafe(f"it has more than {MAX_ENTRIES} entries")
    wanted, seen, total = [], set(), 0
    for info in infos:
        parts, problem = entry_parts(info)
        if problem:
            raise _Unsafe(problem)
        if parts in seen:
            raise _Unsafe(f"entry {capped(repr(info.filename), 200)} appears twice")
        seen.add(parts)
        if info.is_dir() or not parts or not parts[-1].lower().endswith(_SUFFIX) or any(map(_hidden, parts)):
            continue
        total += info.file_size
        if total > MAX_UNPACKED_BYTES:
            raise _Unsafe(f"its .cu files are larger than {MAX_UNPACKED_BYTES >> 20} MiB once unpacked")
        wanted.append((parts, info))
    return wanted


def _copy(source: IO[bytes], sink: IO[bytes], left: int) -> int:
    """Copy an entry, at most ``left`` bytes (zipfile itself stops at the declared size and checks it)."""
    written = 0
    while chunk := source.read(1 << 16):
        written += len(chunk)
        if written > left:
            raise _Unsafe(f"its .cu files are larger than {MAX_UNPACKED_BYTES >> 20} MiB once unpacked")
        sink.write(chunk)
    return written
