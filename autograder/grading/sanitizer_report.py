"""compute-sanitizer's text report as :class:`Finding` values (``sanitize.py`` runs the tools).

Each record becomes a finding with the thread, block and ``file.cu:LINE`` it names, the
array and element where a byte distance from an allocation identifies one, collapsed like
the emulator's (one finding per kind and line, ``others`` counting the rest).

The report format parsed here is compute-sanitizer's text output (CUDA 11 to 13): a record
starts at a header line (``Invalid __global__ write of size 4 bytes``, ``Uninitialized
__global__ memory read ...``, ``Potential RAW hazard detected at __shared__ ...``, ``Race
reported between ...``) and its detail lines follow, each prefixed with ``=========``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from autograder.contract import Buffer, Dim3, Finding, Launch
from autograder.emulator.findings import FindingLog, fmt3
from autograder.feedback import counted

PREFIX = re.compile(r"^=+ ?")

_SEVERITY = r"^(?:ERROR|Error|WARNING|Warning): "
_DIM3 = r"\(\s*(\d+),\s*(\d+),\s*(\d+)\s*\)"
_LOCATION = re.compile(r"\bin (?P<file>[^\s:]+):(?P<line>\d+)")
_THREAD_BLOCK = re.compile(rf"by thread {_DIM3} in block {_DIM3}")
_NEAREST = re.compile(
    r"(?P<distance>[\d,]+) bytes (?P<side>after|before) the nearest allocation at \S+ "
    r"of size (?P<size>[\d,]+) bytes"
)
_INVALID = re.compile(r"^Invalid (?P<space>__\w+__) (?P<access>read|write) of size (?P<bytes>\d+)")
_UNINITIALIZED = re.compile(r"^Uninitialized (?P<space>__\w+__) memory read of size (?P<bytes>\d+)")
_HAZARD = re.compile(
    _SEVERITY + rf"(?:\(.*?\) )?Potential (?P<hazard>RAW|WAR|WAW) hazard "
    rf"detected at __shared__ (?P<address>0x[0-9a-fA-F]+) in block {_DIM3}"
)
_HAZARD_THREAD = re.compile(rf"^(?P<access>Read|Write) Thread {_DIM3} at ")
_RACE = re.compile(_SEVERITY + r"Race reported between (?P<access>Read|Write) access at ")
_RACE_OTHER = re.compile(r"^and (?P<access>Read|Write) access at .*?(?:\[(?P<hazards>\d+) hazards?\])?$")
_MISALIGNED = re.compile(r"\bis misaligned")
_SUMMARY = re.compile(r"^(?:ERROR|RACECHECK) SUMMARY: (?P<count>\d+)")


@dataclass
class _Record:
    """One report of the sanitizer: its header line and the detail lines after it."""

    header: re.Match[str]
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join([self.header.string, *self.lines])


@dataclass(frozen=True)
class Allocation:
    """A buffer the launch allocated, so that a byte distance can name an element."""

    name: str  # "a, b or c" when several buffers have this size
    itemsize: int
    unique: bool = True


def allocations_of(launches: Iterable[Launch]) -> dict[int, Allocation]:
    """Buffers by their size in bytes, as compute-sanitizer names an allocation."""
    by_size: dict[int, list[Buffer]] = {}
    for launch in launches:
        for arg in launch.args:
            if isinstance(arg, Buffer) and arg.name not in {b.name for b in by_size.get(arg.data.nbytes, [])}:
                by_size.setdefault(arg.data.nbytes, []).append(arg)
    return {size: _allocation(buffers) for size, buffers in by_size.items()}


def _allocation(buffers: list[Buffer]) -> Allocation:
    names = [b.name for b in buffers]
    name = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return Allocation(name, buffers[0].data.dtype.itemsize, unique=len(names) == 1)


def parse(text: str, tool: str, allocations: Mapping[int, Allocation] | None = None) -> list[Finding]:
    """Findings from one compute-sanitizer run's text; ``allocations`` maps bytes to buffers."""
    findings = [_finding(record, tool, allocations or {}) for record in _records(text)]
    return collapse([f for f in findings if f is not None])


def error_count(text: str) -> int | None:
    """The sanitizer's own count from its summary lines (one per run), when it printed any."""
    counts = [int(match["count"]) for line in _lines(text) if (match := _SUMMARY.match(line))]
    return sum(counts) if counts else None


def collapse(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per kind, source line and array (the first seen), ``others`` counting the rest."""
    log = FindingLog("")
    for finding in findings:
        log.add(finding, 1 + finding.others)
    return log.findings()


def _lines(text: str) -> list[str]:
    return [PREFIX.sub("", line).strip() for line in text.splitlines() if line.startswith("=")]


def _records(text: str) -> list[_Record]:
    """Reports from header to the next bare ``=========`` (what follows one belongs to none)."""
    records: list[_Record] = []
    current: _Record | None = None
    for line in _lines(text):
        header = _header(line)
        if header is not None:
            current = _Record(header)
            records.append(current)
        elif not line:
            current = None
        elif current is not None:
            current.lines.append(line)
    return records


def _header(line: str) -> re.Match[str] | None:
    for pattern in (_INVALID, _UNINITIALIZED, _HAZARD, _RACE):
        match = pattern.match(line)
        if match:
            return match
    return None


def _finding(record: _Record, tool: str, allocations: Mapping[int, Allocation]) -> Finding | None:
    pattern = record.header.re
    if pattern is _INVALID:
        return _invalid_access(record, tool, allocations)
    if pattern is _UNINITIALIZED:
        return _uninitialized(record, tool)
    if pattern is _HAZARD:
        return _hazard(record, tool)
    return _race(record, tool)


def _location(text: str) -> tuple[str | None, int | None]:
    match = _LOCATION.search(text)
    if match is None:
        return None, None
    return match["file"].rsplit("/", 1)[-1], int(match["line"])


def _thread_block(text: str) -> tuple[Dim3 | None, Dim3 | None]:
    match = _THREAD_BLOCK.search(text)
    if match is None:
        return None, None
    groups = match.groups()
    return _dim3(groups[:3]), _dim3(groups[3:])


def _dim3(values: Sequence[str]) -> Dim3:
    """The three numbers of a report's ``(x, y, z)``."""
    x, y, z = map(int, values)
    return x, y, z


def _where(file: str | None, line: int | None) -> str:
    return f"{file}:{line}" if file and line else "(no source line: compile with -lineinfo)"


def _who(thread: Dim3 | None, block: Dim3 | None) -> str:
    if thread is None:
        return "a thread"
    return f"thread {_dim(thread)} of block {_dim(block)}"


def _dim(value: Dim3 | None) -> str:
    return "(?)" if value is None else fmt3(value)


def _invalid_access(record: _Record, tool: str, allocations: Mapping[int, Allocation]) -> Finding:
    header = record.header
    misaligned = _MISALIGNED.search(record.text) is not None
    kind = "misaligned_access" if misaligned else f"out_of_bounds_{header['access']}"
    file, line = _location(record.text)
    thread, block = _thread_block(record.text)
    verb = "read" if header["access"] == "read" else "wrote"
    what = f"{verb} {header['bytes']} bytes of {header['space']} memory"
    array = index = bound = None
    nearest = _NEAREST.search(record.text)
    if misaligned:
        detail = f"{what} at a misaligned address"
    elif nearest is None:
        detail = f"{what} outside every allocation"
    elif _number(nearest["size"]) in allocations:
        allocation = allocations[_number(nearest["size"])]
        array, index, bound = _element(nearest, allocation)
        side = "past its end" if index >= bound else "before its start"
        if allocation.unique:
            detail = f"{verb} {array}[{index}] {side} ({array} has {counted(bound, 'element')})"
        else:
            detail = f"{verb} element {index} of {array} {side} (each has {counted(bound, 'element')})"
            array = None
    else:
        detail = (
            f"{what} {_number(nearest['distance'])} bytes {_side(nearest)} an allocation of "
            f"{_number(nearest['size'])} bytes"
        )
    message = f"{_where(file, line)}: {_who(thread, block)} {detail} [compute-sanitizer {tool}]"
    return Finding(kind, message, line, thread, block, array, index, bound)


def _element(nearest: re.Match[str], allocation: Allocation) -> tuple[str, int, int]:
    """The array, element index and bound that a byte distance from an allocation means."""
    distance, itemsize = _number(nearest["distance"]), allocation.itemsize
    bound = _number(nearest["size"]) // itemsize
    index = bound + distance // itemsize if nearest["side"] == "after" else -(-distance // itemsize)
    return allocation.name, index, bound


def _side(nearest: re.Match[str]) -> str:
    return "after the end of" if nearest["side"] == "after" else "before the start of"


def _uninitialized(record: _Record, tool: str) -> Finding:
    file, line = _location(record.text)
    thread, block = _thread_block(record.text)
    message = (
        f"{_where(file, line)}: {_who(thread, block)} read {record.header['bytes']} bytes of "
        f"{record.header['space']} memory that nothing wrote [compute-sanitizer {tool}]"
    )
    return Finding("uninitialized_global_read", message, line, thread, block)


def _hazard(record: _Record, tool: str) -> Finding:
    header = record.header
    block = _dim3(header.groups()[2:5])
    accesses = [(m, _location(line)) for line in record.lines if (m := _HAZARD_THREAD.match(line))]
    parts = [
        f"{m['access'].lower()} by thread ({m[2]},{m[3]},{m[4]}) at {_where(*loc)}" for m, loc in accesses
    ]
    # a race is located at its write: every race has one, and it is what a barrier must order
    write = next(((m, loc) for m, loc in accesses if m["access"] == "Write"), None)
    thread = _dim3(write[0].groups()[1:4]) if write else None
    file, line = write[1] if write else (None, None)
    message = (
        f"{_where(file, line)}: {header['hazard']} race on shared memory in block {_dim(block)}: "
        f"{' and '.join(parts) or 'accesses'} with no barrier between them [compute-sanitizer {tool}]"
    )
    return Finding("shared_race", message, line, thread, block)


def _race(record: _Record, tool: str) -> Finding:
    header = record.header
    accesses = [(header["access"], _location(header.string))]
    hazards = 0
    for text in record.lines:
        match = _RACE_OTHER.match(text)
        if match:
            accesses.append((match["access"], _location(text)))
            hazards += int(match["hazards"] or 1)
    file, line = next((loc for access, loc in accesses if access == "Write"), accesses[0][1])
    between = " and ".join(f"a {access.lower()} at {_where(*loc)}" for access, loc in accesses)
    message = (
        f"{_where(file, line)}: race on shared memory between {between} with no barrier "
        f"between them ({max(hazards, 1)} hazards) [compute-sanitizer {tool}]"
    )
    return Finding("shared_race", message, line)


def _number(text: str) -> int:
    return int(text.replace(",", ""))
