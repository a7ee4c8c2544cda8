"""What a student reads, made safe: bounded in size, and free of the grading machine's insides;
and put in plain words: counts with their nouns in the right number, scores with two decimals.

Everything student-controlled (what a kernel prints, what the compiler says about it, what the
grader finds in it) is bounded, so ``results.json`` and the reports never grow past their
limits; every cut is visible (``… (truncated: N more bytes)``). And no text a student reads
holds a Python traceback or a path of the grading machine: ``results.py`` passes everything
through :func:`for_student`; the TA report keeps the details.
"""

from __future__ import annotations

import re

ITEM_OUTPUT_BYTES = 16_000  # one item's feedback; a course's worth of items stays under 1 MB
LINE_BYTES = 500  # one finding's message, one printed line

_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:[ \t]+.*\n?)*", re.M)
# an absolute path of two or more parts, not inside a word, a number or a relative path
_PATH = re.compile(r"(?<![\w.~/-])/(?:[\w.+-]+/)+([\w.+-]*)")


def counted(n: float, noun: str, plural: str | None = None) -> str:
    """``1 element``, ``3 elements``, ``2.5 points``: a number with its noun in the right number."""
    text = two_decimals(n)
    return f"{text} {noun if text == '1' else plural or noun + 's'}"


def two_decimals(x: float) -> str:
    """A number as a person reads it: at most two decimals, no trailing zeros (``12.5``, ``3``)."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def capped(text: str, limit: int) -> str:
    """``text`` when its UTF-8 form fits in ``limit`` bytes, else its head and how much was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    head = data[:limit].decode(errors="ignore")
    return f"{head}… (truncated: {len(data) - len(head.encode())} more bytes)"


def scrubbed(text: str) -> str:
    """``text`` without tracebacks (their last line stays) and with paths cut to file names."""
    return _PATH.sub(r"\1", _TRACEBACK.sub("(details are in the TA report)\n", text))


def for_student(text: str, limit: int = ITEM_OUTPUT_BYTES) -> str:
    return capped(scrubbed(text), limit)


FORMULA_STARTS = frozenset("=+-@\t\r")  # a spreadsheet cell starting so is a formula


def text_cell(text: str) -> str:
    """Text as a spreadsheet shows it, never runs it: a cell starting with ``= + - @``, a tab or a
    carriage return is a formula to Excel and Sheets, so it gets a leading ``'`` (OWASP's advice
    on CSV injection). Every CSV the grader writes passes its text cells here, never its numbers,
    so those stay numbers."""
    return f"'{text}" if text[:1] in FORMULA_STARTS else text
