"""The lecture's ledger for one case: the student's counter totals beside the reference kernel's
and, where the assignment's spec gives it, the lecture's closed form (``Spec.ledger``: counter
-> an expression of the case, such as ``2 * M * N * K / L`` for the global loads of a block
tile), for ``autograder profile``.

The reference's totals come from its source where the course has it (run on the emulator on
the same case), else from the counters a handout records (``reference_counters``): a student
working from the handout sees the same ledger, for the cases the handout carries.
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder import reference_counters
from autograder.backends.base import COUNTER_NAMES, Backend, Counters
from autograder.cases import GroupCase, prepare
from autograder.model import Course
from autograder.spec import Case, Spec, evaluate


@dataclass(frozen=True)
class Row:
    counter: str
    yours: int
    reference: int | None  # None: no reference figure for this case
    formula: str | None = None  # the lecture's closed form, when the spec gives one
    expected: float | None = None  # its value on this case


def ledger(spec: Spec, yours: Counters, reference: dict | None, case: Case) -> list[Row]:
    """A row for every counter either kernel moved, or the spec gives a closed form for."""
    rows = []
    for name in COUNTER_NAMES:
        mine, theirs = yours.totals.get(name, 0), None if reference is None else reference.get(name, 0)
        formula = spec.ledger.get(name)
        if mine or theirs or formula:
            expected = evaluate(formula, case) if formula else None
            rows.append(Row(name, mine, theirs, formula, expected))
    return rows


def reference_totals(course: Course, spec: Spec, case: Case, emulator: Backend) -> tuple[dict | None, str]:
    """The reference kernel's totals on ``case``, and where they come from (or why there are none)."""
    source = course.reference_source(spec.name)
    if source.is_file():
        prepared = prepare(spec, source.read_text(), GroupCase("profile", 0, case, 0), 60)
        counters = emulator.launch(prepared.launch).counters
        return (
            (None, "the reference failed") if counters is None else (counters.totals, "the reference kernel")
        )
    recorded = reference_counters.load(course.reference_counters(spec.name))
    if recorded is None or recorded.problem:
        return None, "no reference kernel or recorded counters in this course"
    for entries in recorded.groups.values():
        for entry in entries:
            if entry.get("case") == dict(case):
                return dict(entry["totals"]), "the reference's recorded counters"
    return None, "the handout records the reference's counters for its own cases only"


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
    widths = [max(len(line[k]) for line in [header, *body]) for k in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    ]
    return f"Per kernel, beside {whence}:\n" + "\n".join(lines)


def first_case(spec: Spec) -> tuple[str, Case]:
    """The case ``profile`` runs by default: the first of the safety group (else of the first group)."""
    group = "safety" if "safety" in spec.cases else next(iter(spec.cases))
    return group, dict(spec.cases[group][0])


def class_ledger(course: Course, names: list[str], emulator: Backend) -> dict[str, dict]:
    """Per assignment, its default case and the reference's totals on it (None where there are
    none), for the class report's rooflines (``autograder batch`` writes it into class.json)."""
    ledgers = {}
    for name in names:
        spec = course.specs[name]
        _group, case = first_case(spec)
        reference, _whence = reference_totals(course, spec, case, emulator)
        ledgers[name] = {"case": case, "reference": reference}
    return ledgers

