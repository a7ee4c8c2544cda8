"""Instructor authoring: the reference kernel → the student's starter, and a new assignment's scaffold.

A reference kernel (``reference/<name>.cu``) marks what only the instructor may see, as Otter
and nbgrader do::

    __global__ void scale(const float* x, float* y, int n) {
        // BEGIN SOLUTION
        for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = 2.0f * x[i];
        // END SOLUTION
        // BEGIN PROMPT
        // // TODO: write y[i] for every i < n.
        // END PROMPT
    }

The starter (``starter/<name>.cu``) is the reference without its SOLUTION blocks and with
every line of its PROMPT blocks un-commented once (the first ``// ``, or a lone ``//``, after
the line's indentation goes); marker lines are in neither. To the compiler markers and PROMPT
lines are comments, so the reference compiles as it is. Lines outside the blocks are in both
files.

``autograder starters`` writes (or, with ``--check``, compares) the starters;
``autograder new`` scaffolds an assignment (``scaffold``). docs/authoring.md is the guide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

import yaml

from autograder.course.discovery import name_key
from autograder.errors import AutograderError

SOLUTION, PROMPT = "SOLUTION", "PROMPT"
_MARKER = re.compile(r"[ \t]*//[ \t]*(BEGIN|END)[ \t]+(SOLUTION|PROMPT)[ \t]*")
_MARKER_LIKE = re.compile(r"[ \t]*//[ \t]*(BEGIN|END)\b")  # a misspelt marker would leak a solution
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# C and C++ keywords (a .cu file is C++): not names a kernel or an assignment can have.
_KEYWORD_TEXT = """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
    false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
    operator or or_eq private protected public register reinterpret_cast requires restrict return
    short signed sizeof static static_assert static_cast struct switch template this thread_local
    throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
    xor xor_eq _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
    _Static_assert _Thread_local"""
_KEYWORDS = frozenset(_KEYWORD_TEXT.split())


class AuthoringError(AutograderError):
    """A reference's markers are malformed, or a scaffold would overwrite something; names file and line."""


@dataclass(frozen=True)
class Block:
    """A SOLUTION or PROMPT block of a reference: the lines between its two markers."""

    kind: str  # SOLUTION or PROMPT
    begin: int  # the line number of its BEGIN marker
    lines: tuple[str, ...]  # line endings kept


def _marker(line: str, path: str | Path, number: int) -> tuple[str, str] | None:
    """``("BEGIN" | "END", SOLUTION | PROMPT)`` when ``line`` is a marker line, else None."""
    found = _MARKER.fullmatch(line.rstrip("\r\n"))
    if found:
        return found[1], found[2]
    if _MARKER_LIKE.match(line):
        raise AuthoringError(
            f"{path}:{number}: {line.strip()!r} is not a marker; the markers are "
            "// BEGIN SOLUTION, // END SOLUTION, // BEGIN PROMPT and // END PROMPT"
        )
    return None


def _pieces(text: str, path: str | Path) -> list[str | Block]:
    """``text`` as its lines outside any block (strings) and its blocks, in order."""
    pieces: list[str | Block] = []
    opened: tuple[str, int] | None = None  # the open block's kind and BEGIN line
    inside: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        marker = _marker(line, path, number)
        if marker is None:
            (inside if opened else pieces).append(line)
        elif marker[0] == "BEGIN":
            if opened:
                raise AuthoringError(
                    f"{path}:{number}: // BEGIN {marker[1]} inside the {opened[0]} block opened at line "
                    f"{opened[1]}: blocks do not nest (close it with // END {opened[0]} first)"
                )
            opened, inside = (marker[1], number), []
        else:
            pieces.append(_closed(opened, marker[1], tuple(inside), path, number))
            opened = None
    if opened:
        raise AuthoringError(
            f"{path}:{opened[1]}: // BEGIN {opened[0]} is never closed by // END {opened[0]}"
        )
    return pieces


def _closed(
    opened: tuple[str, int] | None, kind: str, lines: tuple[str, ...], path: str | Path, number: int
) -> Block:
    """The block that the ``// END kind`` marker at line ``number`` closes."""
    if opened is None:
        raise AuthoringError(f"{path}:{number}: // END {kind} without a // BEGIN {kind} before it")
    if opened[0] != kind:
        raise AuthoringError(
            f"{path}:{number}: // END {kind} closes the {opened[0]} block opened at line {opened[1]} "
            f"(expected // END {opened[0]})"
        )
    block = Block(kind, opened[1], lines)
    if kind == PROMPT:
        _uncommented(block, path)  # a PROMPT block's errors surface whatever is asked of the file
    return block


def _uncommented(block: Block, path: str | Path) -> str:
    """A PROMPT block's lines as the starter has them: each un-commented once."""
    return "".join(_uncomment(line, path, block.begin + 1 + k) for k, line in enumerate(block.lines))


def _uncomment(line: str, path: str | Path, number: int) -> str:
    """``    // text`` → ``    text``; ``//`` alone → an empty line."""
    body = line.rstrip("\r\n")
    indent = body[: len(body) - len(body.lstrip(" \t"))]
    rest = body[len(indent) :]
    if not rest.startswith("//"):
        raise AuthoringError(
            f"{path}:{number}: a PROMPT line must be a // comment, so that the reference compiles "
            "unchanged (write // alone for an empty line of the starter)"
        )
    rest = rest[3:] if rest.startswith("// ") else rest[2:]
    return (indent + rest if rest else "") + line[len(body) :]


def starter_text(reference_text: str, path_for_messages: str | Path = "reference") -> str:
    """The starter a reference generates: SOLUTION blocks removed, PROMPT blocks un-commented once.

    Raises ``AuthoringError`` (naming ``path_for_messages`` and the line) for a block never
    closed, a block inside another, an END without its BEGIN, a misspelt marker, a PROMPT line
    that is not a ``//`` comment, and a reference with no SOLUTION block at all (its starter
    would be the whole solution).
    """
    pieces = _pieces(reference_text, path_for_messages)
    if not any(isinstance(piece, Block) and piece.kind == SOLUTION for piece in pieces):
        raise AuthoringError(
            f"{path_for_messages}: no // BEGIN SOLUTION block, so the starter would be the whole reference"
        )
    return "".join(_student_text(piece, path_for_messages) for piece in pieces)


def _student_text(piece: str | Block, path: str | Path) -> str:
    if isinstance(piece, str):
        return piece
    return _uncommented(piece, path) if piece.kind == PROMPT else ""


def solution_regions(reference_text: str, path_for_messages: str | Path = "reference") -> list[str]:
    """The text of every SOLUTION block of a reference, in order, marker lines left out.

    Each region is the removed lines exactly, line endings included: what the starter must
    not hold, and what a handout given to students can be proven free of. Malformed markers
    raise ``AuthoringError`` as for ``starter_text``.
    """
    pieces = _pieces(reference_text, path_for_messages)
    return ["".join(p.lines) for p in pieces if isinstance(p, Block) and p.kind == SOLUTION]


def _read(path: Path) -> str:
    """A file's text with its line endings as they are."""
    try:
        with path.open(encoding="utf-8", newline="") as opened:
            return opened.read()
    except OSError as e:
        raise AuthoringError(f"{path}: cannot read: {e.strerror}") from e


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as opened:
        opened.write(text)


def reference_path(course_root: Path, name: str) -> Path:
    return Path(course_root) / "reference" / f"{name}.cu"


def starter_path(course_root: Path, name: str) -> Path:
    return Path(course_root) / "starter" / f"{name}.cu"


def assignment_names(course_root: Path) -> list[str]:
    """The course's assignments: the folders of ``assignments/`` that hold a ``spec.py``, sorted."""
    folder = Path(course_root) / "assignments"
    if not folder.is_dir():
        raise AuthoringError(f"{folder}: no such folder (is {course_root} the course root?)")
    return sorted(d.name for d in folder.iterdir() if (d / "spec.py").is_file())


def generated_starter(course_root: Path, name: str) -> str:
    """The starter that ``reference/<name>.cu`` generates."""
    path = reference_path(course_root, name)
    return starter_text(_read(path), path)


def stale_starters(course_root: Path, names: list[str]) -> dict[str, str]:
    """The assignments among ``names`` whose ``starter/<name>.cu`` differs from (or lacks) the
    one its reference generates, each with the generated text."""
    stale = {}
    for name in names:
        text, path = generated_starter(course_root, name), starter_path(course_root, name)
        if not path.is_file() or _read(path) != text:
            stale[name] = text
    return stale


def write_starter(course_root: Path, name: str, text: str) -> Path:
    path = starter_path(course_root, name)
    _write(path, text)
    return path


def scaffold(course_root: Path, name: str, kernel: str | None = None) -> list[Path]:
    """A new, working assignment ``name`` whose kernel is ``kernel`` (default: ``name``).

    Writes ``assignments/<name>/spec.py`` and ``README.md``, ``reference/<name>.cu`` (a
    correct kernel with SOLUTION and PROMPT markers) and the ``starter/<name>.cu`` it
    generates, and adds the assignment's items to ``rubric.yaml`` (its comments kept). Nothing
    is written unless all of it can be: an invalid name, a name the course has (compared as
    submissions are, without case or ``_``), or a file that exists is an ``AuthoringError``.
    Returns the files written, ``rubric.yaml`` last.
    """
    root, kernel = Path(course_root), kernel or name
    _check_identifier(name, "assignment name")
    _check_identifier(kernel, "kernel name")
    _check_new_name(root, name)
    fields = {"name": name, "kernel": kernel}
    files = {
        root / "assignments" / name / "spec.py": Template(_SPEC).substitute(fields),
        root / "assignments" / name / "README.md": Template(_HANDOUT).substitute(fields),
        reference_path(root, name): Template(_REFERENCE).substitute(fields),
    }
    files[starter_path(root, name)] = starter_text(
        files[reference_path(root, name)], reference_path(root, name)
    )
    existing = [str(path) for path in files if path.exists()]
    if existing:
        raise AuthoringError(f"will not overwrite {', '.join(existing)}: nothing was written")
    rubric_path = root / "rubric.yaml"
    rubric = with_rubric_entry(_read(rubric_path), name, rubric_path)
    for path, text in files.items():
        _write(path, text)
    _write(rubric_path, rubric)
    return [*files, rubric_path]


def _check_identifier(name: str, what: str) -> None:
    if not _IDENTIFIER.fullmatch(name) or name in _KEYWORDS:
        raise AuthoringError(
            f"{name!r} is not a valid {what}: it must be a C identifier (letters, digits and _, "
            "not starting with a digit) and not a C or C++ keyword"
        )


def _check_new_name(root: Path, name: str) -> None:
    folder = root / "assignments"
    taken = (
        [d.name for d in folder.iterdir() if name_key(d.name) == name_key(name)] if folder.is_dir() else []
    )
    if name in taken:
        raise AuthoringError(f"the course already has an assignment {name!r} (assignments/{name})")
    if taken:
        raise AuthoringError(
            f"the course already has assignments/{taken[0]}: submissions compare names without case "
            f"or _, so {name!r} would be the same assignment; pick another name"
        )


def with_rubric_entry(text: str, name: str, path: str | Path = "rubric.yaml") -> str:
    """``rubric.yaml``'s text with a scaffolded entry for ``name`` added after the last assignment.

    The text is edited, not re-serialised, so comments and layout stay as they are.
    """
    assignments = _assignments_node(text, path)
    for key, _value in assignments.value:
        if key.value == name:
            raise AuthoringError(f"{path}:{key.start_mark.line + 1}: already has an entry for {name!r}")
    indent = assignments.value[0][0].start_mark.column
    lines = text.splitlines(keepends=True)
    at = _last_line(assignments.value[-1][1]) + 1
    while at < len(lines) and _comment_deeper_than(lines[at], indent):  # the last entry's own comments
        at += 1
    if not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    entry = "".join(
        " " * indent + line + "\n" for line in Template(_RUBRIC_ENTRY).substitute(name=name).splitlines()
    )
    return "".join(lines[:at]) + entry + "".join(lines[at:])


def _assignments_node(text: str, path: str | Path) -> yaml.MappingNode:
    """The rubric's ``assignments`` mapping, which must be a non-empty block mapping."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        raise AuthoringError(f"{path}: not valid YAML: {e}") from e
    entries = {key.value: value for key, value in root.value} if isinstance(root, yaml.MappingNode) else {}
    node = entries.get("assignments")
    if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
        raise AuthoringError(
            f"{path}: expected `assignments:` followed by one indented entry per assignment "
            "(docs/design.md); add the new entry by hand"
        )
    return node


def _last_line(node: yaml.Node) -> int:
    """The (0-based) line that holds the last character of ``node``."""
    while isinstance(node, yaml.CollectionNode) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    return node.end_mark.line if node.end_mark.column > 0 else node.end_mark.line - 1


def _comment_deeper_than(line: str, indent: int) -> bool:
    stripped = line.lstrip(" ")
    return stripped.startswith("#") and len(line) - len(stripped) > indent


_RUBRIC_ENTRY = """\
${name}:
  items:
    - {check: correctness, cases: aligned, points: 4}
    - {check: correctness, cases: ragged,  points: 4}
    - {check: bounds,      cases: safety,  points: 2}
    - {check: barriers,    cases: safety,  points: 2}
"""

_SPEC = '''\
"""${name}: y = 2x, one element per thread (handout: README.md beside this file).

Scaffolded by `autograder new`: make the computation, arguments, launch geometry and cases
this assignment's own (docs/authoring.md), in step with reference/${name}.cu.
"""

from autograder.course.spec import Array, Scalar, Spec, Tolerance


def reference(x, n):
    """The answer in float64 numpy: every input array and scalar by name in, every output by name out."""
    return {"y": 2 * x}


SPEC = Spec(
    name="${name}",  # the folder's name; students submit ${name}.cu
    kernel="${kernel}",  # the __global__ function they write
    args=(  # the kernel's parameters in order; sizes and values are expressions of the case
        Array("x", "n"),  # float32 unless dtype= says otherwise; random, never zero
        Array("y", "n", intent="out"),  # filled with NaN before every launch
        Scalar("n", "n"),
    ),
    block=("256",),  # threads per block, up to three expressions
    grid=("cdiv(n, 256)",),  # blocks
    cases={
        "aligned": ({"n": 256}, {"n": 4096}),  # whole blocks only
        "ragged": ({"n": 1}, {"n": 1000}, {"n": 100_003}),  # a last block with idle threads
        "safety": ({"n": 1}, {"n": 1000}),  # on the emulator: bounds, barriers, traffic; keep them small
        "perf": ({"n": 1 << 24},),  # timed on a GPU against the reference kernel
    },
    reference=reference,
    tolerance=Tolerance(rtol="1e-6", atol="1e-6"),
)
'''

_REFERENCE = """\
// ${name}: y[i] = 2 x[i] for 0 <= i < n.
// Launch: block 256 threads, grid ceil(n / 256) blocks. Read assignments/${name}/README.md.

__global__ void ${kernel}(const float* x, float* y, int n) {
    // BEGIN SOLUTION
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // one thread per element, as the lectures start
    if (i < n) {  // the last block's threads past the end touch nothing
        y[i] = 2.0f * x[i];
    }
    // END SOLUTION
    // BEGIN PROMPT
    // // TODO: compute this thread's index i; if i < n, write y[i].
    // END PROMPT
}
"""

_HANDOUT = """\
# ${name} — one thread, one output

<!-- Scaffolded by `autograder new`: rewrite each section for this assignment (docs/authoring.md). -->

Write the CUDA kernel

```cpp
__global__ void ${kernel}(const float* x, float* y, int n);
```

that sets `y[i] = 2·x[i]` for every `0 ≤ i < n`. Start from `starter/${name}.cu` and submit it
as `${name}.cu`.

## Launch geometry

| | value |
|---|---|
| block | 256 threads |
| grid | `⌈n / 256⌉` blocks |
| arrays | `x`: `n` floats (read only); `y`: `n` floats (write only) |

## What to do

1. compute the thread's index `i = blockIdx.x·blockDim.x + threadIdx.x`;
2. threads with `i < n` write `y[i]`; the other threads of the last block touch nothing.

## Cases

| group | n |
|---|---|
| aligned | 256, 4096 |
| ragged | 1, 1000, 100 003 |
| safety | 1, 1000 (run on the emulator) |
| perf | 2²⁴ (GPU only) |

## How it is graded (`rubric.yaml`)

Inputs are fresh random floats (never zero) drawn from a secret seed. `y` is filled with NaN
before every launch, so an output you never write is reported as unwritten.

- **correctness (aligned, ragged)** — every output within `1e-6 + 1e-6·|ref|` of a float64
  numpy reference; the report names the largest error, the first wrong index and how many
  outputs were never written.
- **bounds (safety)** — the emulator watches every access: one outside an array is named with
  its thread, block, index and source line.
- **barriers (safety)** — a `__syncthreads()` that only part of a block reaches, a
  shared-memory race, or a read of shared memory nobody wrote.

Safety items earn nothing unless the kernel is correct on their cases.

## Checking your work

`autograder check ${name}.cu` grades your file the way your submission will be graded (on the
PTX emulator when your machine has no GPU) and prints every item's feedback. `autograder
profile . --assignment ${name}` runs one safety case on the emulator and prints its memory
traffic line by line, then its totals beside the reference's, and the registers, spills and
occupancy the compiler gives your kernel; it exits 1 when it finds a defect.
With `--plot roofline.svg` it also draws your kernel's roofline beside the reference's, on the
larger case the picture's title names; that needs matplotlib: `python3 -m pip install '.[plot]'`
in your virtual environment.
"""
