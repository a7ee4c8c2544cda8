"""The lecture's ledger for one case: the student's counter totals beside the reference kernel's
and, where the assignment's spec gives it, the lecture's closed form (``Spec.ledger``: counter
-> an expression of the case, such as ``2 * M * N * K / L`` for the global loads of a block
tile), for ``autograder profile``.

The reference's totals come from its source where the course has it (run on the emulator on
the same case), else from the counters a handout records (``reference_counters``): a student
working from the handout sees the same ledger, for the cases the handout carries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autograder.contract import COUNTER_NAMES, VALUES_FROM_BYTES, Backend, Counters
from autograder.course.cases import GroupCase, prepare
from autograder.course.folder import Course
from autograder.course.spec import Case, Spec, evaluate
from autograder.grading import reference_counters
from autograder.grading.performance import minimum_work

IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Row:
    counter: str
    yours: int
    reference: int | None  # None: no reference figure for this case
    formula: str | None = None  # the lecture's closed form, when the spec gives one
    expected: float | None = None  # its value on this case


def graded_totals(totals: Mapping[str, int], spec: Spec | None) -> dict[str, int]:
    """``totals`` with each ``*_values`` counter its ``*_bytes`` over the assignment's element size
    (``Spec.value_bytes``; a part of a value counts as one), whatever type the kernel moved them as:
    what the traffic items score and the ledger shows. Without a spec, an element of 4 bytes (an
    ``Array``'s default float32). A values count with no bytes beside it (recorded by a grader
    that did not count them, or a backend that counts values only) is kept as it is."""
    graded = dict(totals)
    for values, nbytes in VALUES_FROM_BYTES.items():
        if nbytes in totals:
            size = spec.value_bytes(values) if spec is not None else 4
            graded[values] = -(-int(totals[nbytes]) // size)
    return graded


def ledger(spec: Spec, yours: Counters, reference: Mapping[str, int] | None, case: Case) -> list[Row]:
    """A row for every counter either kernel moved, or the spec gives a closed form for; values are
    bytes over the assignment's element size (``graded_totals``)."""
    rows = []
    totals = graded_totals(yours.totals, spec)
    reference = None if reference is None else graded_totals(reference, spec)
    for name in COUNTER_NAMES:
        mine, theirs = totals.get(name, 0), None if reference is None else reference.get(name, 0)
        formula = spec.ledger.get(name)
        if mine or theirs or formula:
            expected = evaluate(formula, case) if formula else None
            rows.append(Row(name, mine, theirs, formula, expected))
    return rows


@dataclass(frozen=True)
class Reference:
    """The reference kernel's counts on a case: totals, and per line with its source where the
    course has the source (a handout's recorded counts are totals only)."""

    totals: dict[str, int] | None
    whence: str  # where they come from, or why there are none
    by_line: dict[int, dict[str, int]] = field(default_factory=dict)
    source: str = ""


def reference_counts(course: Course, spec: Spec, case: Case, emulator: Backend) -> Reference:
    """The reference kernel's counts on ``case``, from its source, else from a handout's record."""
    source = course.reference_source(spec.name)
    if source.is_file():
        text = source.read_text()
        prepared = prepare(spec, text, GroupCase("profile", 0, case, 0), 60)
        counters = emulator.launch(prepared.launch).counters
        if counters is None:
            return Reference(None, "the reference failed")
        return Reference(counters.totals, "the reference kernel", counters.by_line, text)
    recorded = reference_counters.load(course.reference_counters(spec.name))
    if recorded is None or recorded.problem:
        return Reference(None, "no reference kernel or recorded counters in this course")
    for entries in recorded.groups.values():
        for entry in entries:
            if entry.get("case") == dict(case):
                return Reference(dict(entry["totals"]), "the reference's recorded counters")
    return Reference(None, "the handout records the reference's counters for its own cases only")


# bytes, which need no element size (per line: a line of yours beside the reference's)
LINE_COUNTERS = ("global_load_bytes", "global_store_bytes", "shared_load_bytes", "shared_store_bytes")
MIN_LINE_CHARS = 8  # shorter lines (a brace, `i++;`) say nothing about which line is which


# (your line, the reference's line, its text, your counts, the reference's): ``corresponding_lines``
LinePair = tuple[int, int, str, dict[str, int], dict[str, int]]


def corresponding_lines(
    source: str, by_line: Mapping[int, dict[str, int]], reference: Reference
) -> list[LinePair]:
    """(your line, the reference's line, its text, your counts, the reference's) for each line of
    yours whose text is a line of the reference's (each text once in either file) and that moves
    bytes the lectures count (``LINE_COUNTERS``) in either kernel."""
    if not reference.by_line:
        return []
    yours = {number: text for text, number in _unique_lines(source).items()}
    theirs = _unique_lines(reference.source)
    pairs: list[LinePair] = []
    for line, counts in sorted(by_line.items()):
        text = yours.get(line)
        if text in theirs and theirs[text] in reference.by_line:
            ref = reference.by_line[theirs[text]]
            if any(counts.get(c) or ref.get(c) for c in LINE_COUNTERS):
                pairs.append((line, theirs[text], text, counts, ref))
    return pairs


def _unique_lines(source: str) -> dict[str, int]:
    """Each line (spaces collapsed) that appears once, with its 1-based number."""
    seen: dict[str, list[int]] = {}
    for number, line in enumerate(source.splitlines(), 1):
        text = " ".join(line.split())
        if len(text) >= MIN_LINE_CHARS:
            seen.setdefault(text, []).append(number)
    return {text: numbers[0] for text, numbers in seen.items() if len(numbers) == 1}


def lines_table(pairs: list[LinePair]) -> str:
    """The corresponding lines, yours beside the reference's, on the bytes the lectures count."""
    header = ("line", "ref line", *(c.removesuffix("_bytes") for c in LINE_COUNTERS), "source")
    body = [
        (
            str(line),
            str(ref_line),
            *(_pair(counts.get(c, 0), ref.get(c, 0)) for c in LINE_COUNTERS),
            text if len(text) <= 50 else text[:49] + "…",
        )
        for line, ref_line, text, counts, ref in pairs
    ]
    return "Lines that are also the reference's, your bytes / the reference's:\n" + _table(header, body)


def _pair(yours: int, theirs: int) -> str:
    return f"{yours:,} / {theirs:,}" if yours or theirs else ""


def ledger_table(rows: list[Row], whence: str) -> str:
    """The rows as a text table; ``whence`` says where the reference column comes from."""
    header = ("counter", "yours", "reference", "yours / reference", "lecture")
    body = [
        (
            r.counter,
            f"{r.yours:,}",
            "-" if r.reference is None else f"{r.reference:,}",
            f"{r.yours / r.reference:.2f}x" if r.reference else "",
            f"{r.formula} = {r.expected:,.0f}" if r.formula else "",
        )
        for r in rows
    ]
    return f"Per kernel, beside {whence}:\n" + _table(header, body)


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(line[k]) for line in [header, *body]) for k in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    )


def first_case(spec: Spec) -> tuple[str, Case]:
    """The case ``profile`` runs by default: the first of the safety group (else of the first group)."""
    group = "safety" if "safety" in spec.cases else next(iter(spec.cases))
    return group, dict(spec.cases[group][0])


def timed_case(spec: Spec) -> Case | None:
    """The case of the perf group with the most work (the one the roofline's timed points show);
    None where the spec has no perf group."""
    return max(spec.cases.get("perf", ()), key=lambda c: minimum_work(spec, c).flops, default=None)


def roofline_case(spec: Spec) -> tuple[str, Case]:
    """The case a roofline is drawn at (``profile --plot``, the class report's student pages): the
    largest case listed outside the perf group with the timed case's compile-time parameters
    (``like_timed``), ragged ones included. Not the first safety case (n=1), where one thread does
    all the work and every kernel sits at the same point; this one moves data as the timed kernel
    does, at a size the emulator counts in seconds, and where it is ragged a missing guard shows."""
    timed = timed_case(spec)
    listed = [(g, dict(c)) for g, cases in spec.cases.items() if g != "perf" for c in cases]
    alike = [(g, c) for g, c in listed if timed is None or like_timed(spec, c, timed)]
    return max(alike or listed, key=lambda gc: minimum_work(spec, gc[1]).bytes)


def like_timed(spec: Spec, case: Case, timed: Case) -> bool:
    """Whether ``case`` has ``timed``'s compile-time parameters (those ``Spec.defines`` names: the
    tiles, the block), and so moves data as the timed kernel does."""
    tiles = {name for expression in spec.defines.values() for name in IDENTIFIER.findall(expression)}
    return all(case.get(k) == timed.get(k) for k in tiles)


def stand_in(spec: Spec, timed: Case) -> Case | None:
    """The aligned case a timed case (far too large to count) is counted on: the largest with
    its compile-time parameters (``like_timed``), so that ``timed_scale`` can grow its counts to
    the timed case by the lecture's closed forms, which hold on aligned cases; None where no
    aligned case has them."""
    alike = [dict(c) for c in spec.cases.get("aligned", ()) if like_timed(spec, c, timed)]
    return max(alike, key=lambda c: minimum_work(spec, c).bytes, default=None)


SCALED = {
    "flops": None,
    "global_load_sectors": "global_load_values",
    "global_store_sectors": "global_store_values",
}


def timed_scale(spec: Spec, stand_in: Case, timed: Case) -> dict[str, float]:
    """How the counts on ``stand_in`` grow to ``timed``: per counter of the roofline (flops, global
    load and store sectors), the ratio of the spec's closed forms on the two cases (its ``flops``,
    the ledger's global load and store values); empty, counts kept, unless the spec gives all three."""
    formulas = {
        counter: spec.ledger.get(values, "") if values else spec.flops for counter, values in SCALED.items()
    }
    if not all(f and f != "0" for f in formulas.values()):
        return {}
    return {counter: evaluate(f, timed) / evaluate(f, stand_in) for counter, f in formulas.items()}


def class_ledger(course: Course, names: list[str], emulator: Backend) -> dict[str, dict[str, Any]]:
    """Per assignment, the case its roofline is drawn at (``roofline_case``) and the reference's
    totals on it (None where there are none), and the same on the stand-in of its timed case with
    the most work (``timed``: the case ``for`` which it stands, the stand-in, the reference's totals
    there, the scale between them) where it has one, for the class report's rooflines
    (``autograder batch`` writes it into class.json)."""
    ledgers: dict[str, dict[str, Any]] = {}
    for name in names:
        spec = course.specs[name]
        _group, case = roofline_case(spec)
        totals = reference_counts(course, spec, case, emulator).totals
        ledgers[name] = {"case": case, "reference": totals and graded_totals(totals, spec)}
        timed = timed_case(spec)
        counted_on = stand_in(spec, timed) if timed else None
        if timed and counted_on is not None:
            totals = reference_counts(course, spec, counted_on, emulator).totals
            totals = totals and graded_totals(totals, spec)
            scale = timed_scale(spec, counted_on, timed)
            ledgers[name]["timed"] = {
                "for": dict(timed),
                "case": counted_on,
                "reference": totals,
                "scale": scale,
            }
    return ledgers
