"""The SOURCE of ``autograder batch``: a Gradescope export (zip or folder) or a folder of submissions.

The file handed to ``batch`` may be crafted, so nothing in it is trusted:

- Each submission's folder name (a key of ``submission_metadata.yml``, or a folder of a plain
  SOURCE) names a folder of DIR too, so it must be one plain name (``name_problem``). An
  entry that is not is refused with the reason; the rest of the class is graded.
- ``submission_metadata.yml`` is read with YAML's safe loader, without aliases (a 40-byte
  self-reference or a 571-byte alias bomb took the batch down), at most
  ``MAX_METADATA_BYTES``; whatever is wrong with it is one sentence (``BatchError``).
- A zip is unpacked entry by entry within ``Limits``: at most ``files`` entries and
  ``total_bytes`` written, no entry packed more than ``ratio`` times, no entry that is a
  link, absolute, or leaves the zip.
- Only what ``grade`` reads is taken (``submission_files``): kernel sources (``.cu``) and
  uploaded ``.zip`` files, each at most one byte past the size ``grade`` accepts
  (``policy.MAX_SOURCE_BYTES``, ``discovery.MAX_ZIP_BYTES``), so the verdict is the one on
  the whole file. Any other file is kept as an empty file of its name: ``grade`` only lists
  such names, when it finds no kernel. Each submission's ``skipped`` says what was not taken
  whole, and why.
"""

from __future__ import annotations

import os
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from autograder.course.discovery import MAX_ZIP_BYTES, entry_parts
from autograder.course.policy import MAX_SOURCE_BYTES
from autograder.errors import AutograderError

EXPORT_METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 16 << 20  # Gradescope's is about 300 bytes a submission
MAX_METADATA_DEPTH = 32  # Gradescope's nests 4 deep
RESERVED = frozenset({"class.json", "scores.csv", "regrades.csv", "report"})  # DIR's own files
RATIO_FLOOR = 1 << 20  # entries smaller than this unpacked are never bombs, whatever their ratio
LISTED = 20  # skipped files named per submission; past that, a count


class BatchError(AutograderError):
    """SOURCE cannot be used; the message says why."""


@dataclass(frozen=True)
class Limits:
    """What unpacking an export zip may cost (tests lower them)."""

    files: int = 100_000  # entries of the zip
    total_bytes: int = 2 << 30  # written, all entries together
    ratio: float = 100.0  # an entry's unpacked size over its packed size (text packs about 5 times)


@dataclass(frozen=True)
class Submitter:
    name: str = ""
    sid: str = ""
    email: str = ""


@dataclass(frozen=True)
class Submission:
    id: str  # its folder's name in SOURCE, and in DIR; for a refused entry, its name as written
    folder: Path
    submitters: tuple[Submitter, ...] = ()
    refused: str | None = None  # why it is not graded: its name is not one plain folder name
    skipped: tuple[str, ...] = ()  # what of its files unpacking left out, and why

    def matches(self, wanted: str) -> bool:
        """Whether ``wanted`` (``--only``) names this submission or one of its submitters."""
        names = {self.id} | {v for s in self.submitters for v in (s.name, s.sid, s.email) if v}
        return wanted.casefold() in {n.casefold() for n in names}


def read_class(source: Path, scratch: Path, limits: Limits = Limits()) -> list[Submission]:
    """The submissions of SOURCE (an export zip is unpacked under ``scratch``), in name order."""
    notes: dict[str, str] = {}
    if source.is_file() and zipfile.is_zipfile(source):
        notes = unpack(source, scratch, limits)
        source = scratch
    if not source.is_dir():
        raise BatchError(f"{source} is neither a folder nor a .zip of submissions")
    root = _export_root(source)
    if root is None:
        named = {p.name: () for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")}
    else:
        named = {name: _submitters(entry) for name, entry in _metadata(root / EXPORT_METADATA).items()}
        root = root.resolve()
    base = (root or source).resolve()
    return [
        _submission(base, name, people, notes)
        for name, people in sorted(named.items())
        if name_problem(name) or (base / name).is_dir()
    ]


def _submission(root: Path, name: str, people: tuple, notes: dict[str, str]) -> Submission:
    problem = name_problem(name) or _link_problem(root / name)
    if problem:
        shown = ascii(name)[:200].replace("[", "\\x5b").replace("]", "\\x5d")  # no markup to rich
        return Submission(shown, root, people, refused=problem)
    folder = root / name
    mine = [
        f"{Path(path).relative_to(folder).as_posix()}: {why}"
        for path, why in notes.items()
        if Path(path).is_relative_to(folder)
    ]
    return Submission(name, folder, people, skipped=tuple(_listed(mine)))


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a submission's folder in SOURCE and in DIR, or None when it can."""
    if name in ("", ".", ".."):
        why = "is empty, '.' or '..'"
    elif "/" in name or "\\" in name:
        why = "is a path, not one folder name"
    elif len(name.encode()) > 200:
        why = "is longer than 200 bytes"
    elif any(unicodedata.category(c).startswith("C") or c in "[]" for c in name):
        why = "holds a control character or a bracket"
    elif name in RESERVED:
        why = f"is one of DIR's own ({', '.join(sorted(RESERVED))})"
    else:
        return None
    return f"its folder name {why}; rename the folder (and its key in {EXPORT_METADATA}) to grade it"


def _link_problem(folder: Path) -> str | None:
    """A linked submission folder would have grading read, and DIR keep, files from elsewhere."""
    return "its folder is a symbolic link" if folder.is_symlink() else None


def _export_root(folder: Path) -> Path | None:
    """The folder holding ``submission_metadata.yml``: ``folder`` or its one subfolder (the zip's)."""
    if (folder / EXPORT_METADATA).is_file():
        return folder
    inner = [p for p in folder.iterdir() if p.is_dir() and (p / EXPORT_METADATA).is_file()]
    return inner[0] if len(inner) == 1 else None


# --- submission_metadata.yml ----------------------------------------------------------------


class _ExportLoader(yaml.SafeLoader):
    """Gradescope writes Ruby's YAML (``:key:`` symbols, tags such as ``!ruby/object``), never aliases."""

    depth = 0

    def compose_node(self, parent, index):
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "it uses a YAML alias (*name)", mark)
        if self.depth == MAX_METADATA_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"it nests deeper than {MAX_METADATA_DEPTH}", mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _untagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_ExportLoader.add_multi_constructor("!", _untagged)


def _metadata(path: Path) -> dict[str, dict]:
    """``submission_metadata.yml`` as {folder: {key without its leading ':': value}}."""
    data = _yaml(path)
    if not isinstance(data, dict):
        raise BatchError(f"{EXPORT_METADATA} is not a mapping of submission folders")
    return {str(name): _symbols(entry) for name, entry in data.items() if isinstance(entry, dict)}


def _yaml(path: Path):
    """The document, or ``BatchError`` in one line whatever is wrong with it."""
    try:
        with path.open("rb") as f:
            text = f.read(MAX_METADATA_BYTES + 1)
        if len(text) > MAX_METADATA_BYTES:
            raise BatchError(f"{EXPORT_METADATA} is larger than {MAX_METADATA_BYTES >> 20} MiB")
        return yaml.load(text.decode("utf-8"), Loader=_ExportLoader)  # a SafeLoader
    except OSError as e:
        raise BatchError(f"{EXPORT_METADATA} cannot be read ({e.strerror or type(e).__name__})") from e
    except UnicodeDecodeError as e:
        raise BatchError(f"{EXPORT_METADATA} is not UTF-8 text (byte {e.start})") from e
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise BatchError(f"{EXPORT_METADATA} cannot be read: {e.problem}{where}") from e
    except yaml.YAMLError as e:
        raise BatchError(f"{EXPORT_METADATA} cannot be read: {str(e).splitlines()[0]}") from e
    except RecursionError as e:
        raise BatchError(f"{EXPORT_METADATA} cannot be read: it is nested too deeply") from e


def _symbols(value):
    """Ruby symbol keys (``:name``) as plain ones, all the way down."""
    if isinstance(value, dict):
        return {str(k).lstrip(":"): _symbols(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_symbols(v) for v in value]
    return value


def _submitters(entry: dict) -> tuple[Submitter, ...]:
    people = entry.get("submitters") or []
    return tuple(
        Submitter(str(p.get("name") or ""), str(p.get("sid") or ""), str(p.get("email") or ""))
        for p in (people if isinstance(people, list) else [])
        if isinstance(p, dict)
    )


# --- what grading reads ---------------------------------------------------------------------


def read_limit(name: str) -> int | None:
    """How many bytes of file ``name`` ``grade`` can read (one past what it accepts); None: only its name."""
    lower = name.lower()
    if lower.endswith(".cu"):
        return MAX_SOURCE_BYTES + 1
    if lower.endswith(".zip"):
        return MAX_ZIP_BYTES + 1
    return None


def submission_files(folder: Path) -> tuple[dict[str, bytes], list[str]]:
    """The files of ``folder`` as ``grade`` reads them, by relative path, and what was cut or emptied.

    Links are left out, as ``grade`` never follows them.
    """
    files, skipped = {}, []
    for parent, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not Path(parent, d).is_symlink())
        for name in sorted(names):
            path = Path(parent, name)
            if path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(folder).as_posix()
            files[rel] = _taken(path, read_limit(rel))
            if len(files[rel]) == read_limit(rel):
                skipped.append(f"{rel}: larger than grading accepts; its first {len(files[rel])} bytes kept")
    return files, _listed(skipped)


def _taken(path: Path, limit: int | None) -> bytes:
    if limit is None:
        return b""
    with path.open("rb") as f:
        return f.read(limit)


def _listed(skipped: list[str]) -> list[str]:
    if len(skipped) <= LISTED:
        return skipped
    return [*skipped[:LISTED], f"and {len(skipped) - LISTED} more"]


# --- an export zip --------------------------------------------------------------------------


def unpack(archive: Path, target: Path, limits: Limits) -> dict[str, str]:
    """Unpack what grading reads of ``archive`` under ``target`` (see the module docstring).

    Returns why each entry left out or emptied was, by the path it has (or would have) there.
    """
    target = target.resolve()
    try:
        with zipfile.ZipFile(archive) as opened:
            infos = opened.infolist()
            if len(infos) > limits.files:
                raise BatchError(f"{archive.name} has more than {limits.files} entries")
            written, notes = 0, {}
            for info in infos:
                path, why = _entry_path(info, target)
                if why:
                    notes[str(path or target / "?")] = why
                    continue
                written += _unpack_entry(opened, info, path, limits, notes)
                if written > limits.total_bytes:
                    raise BatchError(
                        f"{archive.name} unpacks to more than {limits.total_bytes >> 20} MiB of "
                        "kernel sources and .zip files"
                    )
            return notes
    except zipfile.BadZipFile as e:
        raise BatchError(f"{archive.name} is not a readable .zip ({e})") from e


def _entry_path(info: zipfile.ZipInfo, target: Path) -> tuple[Path | None, str | None]:
    """Where an entry goes under ``target``, or why it does not (``discovery.entry_parts``)."""
    parts, problem = entry_parts(info)
    path = target.joinpath(*parts) if parts else None
    if problem or path is None:
        return path, f"{problem or 'an entry with no name'}, not unpacked"
    if path.exists() and not info.is_dir():
        return path, "appears twice in the zip; the first kept"
    return path, None


def _unpack_entry(
    opened: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, limits: Limits, notes: dict[str, str]
) -> int:
    """Write one entry (cut at its read limit; empty when grading reads only its name); bytes written."""
    limit = read_limit(info.filename)
    if PurePosixPath(info.filename).name == EXPORT_METADATA:
        limit = MAX_METADATA_BYTES + 1
    if limit is not None and (why := _bomb(info, limits)):
        notes[str(path)], limit = why, None
    try:
        if info.is_dir():
            path.mkdir(parents=True, exist_ok=True)
            return 0
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as sink:
            if limit is None:
                return 0
            with opened.open(info) as source:
                return _copy(source, sink, limit)
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError, OSError) as e:
        if path.is_file():  # never half an entry
            path.write_bytes(b"")
        notes[str(path)] = f"could not be unpacked ({type(e).__name__})"
        return 0


def _bomb(info: zipfile.ZipInfo, limits: Limits) -> str | None:
    """Why an entry is a bomb (packed past ``limits.ratio``), or None."""
    ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size > RATIO_FLOOR and ratio > limits.ratio:
        return f"packed {ratio:.0f} times (more than {limits.ratio:g}), not unpacked"
    return None


def _copy(source, sink, limit: int) -> int:
    """At most ``limit`` bytes of ``source`` into ``sink``; how many."""
    written = 0
    while written < limit and (chunk := source.read(min(1 << 16, limit - written))):
        sink.write(chunk)
        written += len(chunk)
    return written
