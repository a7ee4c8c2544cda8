"""Source policy: what a submitted kernel file must be before any compiler sees it.

A submission is one UTF-8 file of at most 1 MiB that includes nothing but CUDA's and C++'s
own headers. The include rule is a security boundary, not style: NVRTC reads any file an
``#include`` names, the reference solutions live on the grading machine beside the
submission, and a compiler error would echo a file's text back to the student.

The scan splices continued lines, then reads tokens in one pass from left to right as the
preprocessor does: a comment becomes one space (so ``#/*<newline>*/include`` is one
directive), string and character literals are blanked (so a ``"/*"`` inside a string cannot
hide a directive, and a directive inside a raw string is no directive), and identifiers and
numbers are skipped whole (so a digit separator, ``1'000``, opens no character literal).
Then it looks for ``#include`` in either spelling (``#`` or the digraph ``%:``). Where it
cannot tell, it refuses rather than lets a file through.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from pathlib import Path

from autograder.backends.compiler import STANDARD_HEADERS

MAX_SOURCE_BYTES = 1 << 20

CUDA_HEADERS = frozenset(
    {
        "cuda_fp16.h",
        "cuda_bf16.h",
        "mma.h",
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "device_launch_parameters.h",
        "cooperative_groups.h",
        "cooperative_groups/reduce.h",
        "cooperative_groups/scan.h",
        "cooperative_groups/memcpy_async.h",
    }
)
ALLOWED_HEADERS = CUDA_HEADERS | frozenset(STANDARD_HEADERS)

_DIRECTIVE = re.compile(r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*(include_next|include|import|embed)\b(.*)$", re.M)
_HAS_INCLUDE = re.compile(r"\b__has_include(?:_next)?\b")
_SYSTEM_HEADER = re.compile(r"^\s*<([^<>\s]+)>\s*$")
_TOKEN = re.compile(
    r"""(?P<literal>(?:u8|[uUL])?R"(?P<delimiter>[^()\\\s]{0,16})\(.*?\)(?P=delimiter)"|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')"""
    r"""|(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"""
    r"""|(?P<word>[A-Za-z_]\w*|\.?\d(?:[eEpP][+-]|'\w|[\w.])*)""",
    re.S,
)


def read_source(path: Path) -> tuple[str, str | None]:
    """The submitted source, or why it cannot be graded (the sentence the student reads).

    Never reads more than the limit and one byte; a UTF-8 byte-order mark is dropped.
    """
    if path.is_symlink():  # it could name the reference solution beside the submission
        return "", f"{path.name} is a symbolic link; submit the file itself"
    if not path.is_file():
        return "", f"{path.name} was not submitted"
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SOURCE_BYTES + 1)
    except OSError as e:
        return "", f"{path.name} could not be read ({e.strerror or type(e).__name__}); submit it again"
    if len(data) > MAX_SOURCE_BYTES:
        return "", f"{path.name} is larger than the limit of {MAX_SOURCE_BYTES} bytes"
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return "", f"{path.name} is not UTF-8 text (byte {e.start})"
    return source, include_problem(source, path.name)


def include_problem(source: str, filename: str) -> str | None:
    """Why an ``#include`` of ``source`` is not allowed, naming its line; None when all are."""
    spliced, physical_line = _logical_lines(source)
    text, origin = _preprocessed(spliced)
    for match in _DIRECTIVE.finditer(text):
        header = _SYSTEM_HEADER.match(match.group(2))
        if match.group(1) == "include" and header and header.group(1) in ALLOWED_HEADERS:
            continue
        start, end = origin(match.start()), origin(match.end())
        line = physical_line[spliced.count("\n", 0, start)]
        written = " ".join(spliced[start:end].split())
        allowed = ", ".join(f"<{h}>" for h in sorted(ALLOWED_HEADERS))
        return (
            f"{filename}:{line}: '{written}' is not allowed: a submission is this one file, "
            f"and it may include only these headers: {allowed}"
        )
    probe = _HAS_INCLUDE.search(text)  # it would tell whether a file exists on the grading machine
    if probe:
        line = physical_line[spliced.count("\n", 0, origin(probe.start()))]
        name = probe.group(0)
        return f"{filename}:{line}: '{name}' is not allowed: it asks about files beside the submission"
    return None


def code_only(source: str) -> str:
    """``source`` as code: continued lines spliced, each comment one space, literals blanked."""
    return _preprocessed(_logical_lines(source)[0])[0]


def _preprocessed(spliced: str) -> tuple[str, Callable[[int], int]]:
    """Comments as one space, literals blanked; and a map from its positions back to ``spliced``'s."""
    pieces: list[str] = []
    starts: list[int] = []  # where each piece starts in the text returned
    origins: list[int] = []  # and where it starts in ``spliced``
    position, last = 0, 0
    for match in _TOKEN.finditer(spliced):
        for piece, where in ((spliced[last : match.start()], last), (_token_text(match), match.start())):
            pieces.append(piece)
            starts.append(position)
            origins.append(where)
            position += len(piece)
        last = match.end()
    pieces.append(spliced[last:])
    starts.append(position)
    origins.append(last)

    def origin(offset: int) -> int:
        i = bisect.bisect_right(starts, offset) - 1
        return min(origins[i] + offset - starts[i], len(spliced))

    return "".join(pieces), origin


def _token_text(match: re.Match[str]) -> str:
    if match.group("comment"):
        return " "
    if match.group("literal"):
        return re.sub(r"[^\n]", " ", match.group(0))
    return match.group(0)


def _logical_lines(source: str) -> tuple[str, list[int]]:
    """Splice backslash-continued lines; return the text and each logical line's first line number."""
    logical: list[str] = []
    starts: list[int] = []
    pending, start = "", 1
    for number, line in enumerate(source.replace("\r\n", "\n").split("\n"), start=1):
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        logical.append(pending + line)
        starts.append(start)
        pending = ""
    if pending:
        logical.append(pending)
        starts.append(start)
    return "\n".join(logical), starts
