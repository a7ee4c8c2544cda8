"""Gradescope's ``results.json``, written whatever happens.

One test per rubric item: ``name``, ``score``, ``max_score``, ``status``, ``output``,
``visibility``, ``number`` (``<assignment>.<item>`` in rubric order) and ``tags`` (the
assignment and the check kind, plus ``regrade`` when a person should look). Gradescope
renders the outputs as Markdown (``output_format: "md"``): every text that can quote the
student (a compiler log, findings, printed lines, file names) is a fenced code block whose
fence no backtick run in the text can close. ``extra_data`` holds the backend and the
grader's version, never the seed (Gradescope does not say it is hidden from students). With
``leaderboard: true`` in the rubric, ``leaderboard`` holds each timed item's measured ratio
(:func:`leaderboard`); without it the key is absent. When the grader itself fails,
:func:`fallback_results` still lists every rubric item it knows, each scoring 0 with the
reason. docs/pipeline.md says why this is not gradescope-utils' ``JSONTestRunner``.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import re
from pathlib import Path

from autograder.course.rubric import Item, Rubric
from autograder.course.vocabulary import TIME
from autograder.feedback import counted, for_student, two_decimals
from autograder.grading.evidence import Json
from autograder.grading.grade import Grade, ItemResult


def build_results(grade: Grade, rubric: Rubric) -> Json:
    tests = [_test(r.item, r.score, r.output, r.passed, rubric, r.regrade) for r in grade.items]
    notes = fenced(for_student("\n".join(grade.notes)))
    results = {
        "score": round(sum(t["score"] for t in tests), 4),
        "execution_time": round(grade.elapsed_s),
        "output": "\n\n".join(filter(None, [_not_run(grade), notes, _summary(grade)])),
        "output_format": "md",
        "extra_data": {"backend": grade.backend, "grader_version": grader_version()},
        "tests": tests,
    }
    board = leaderboard(grade, rubric) if rubric.leaderboard else []
    if board:  # a submission with nothing measured is left off the board, not ranked at 0
        results["leaderboard"] = board
    return results


def leaderboard(grade: Grade, rubric: Rubric) -> list[Json]:
    """Gradescope's leaderboard: one entry per timed performance item that measured a ratio.

    The value is the ratio student/reference time (lower is better: ``order: asc``), rounded
    as the student's feedback prints it. An item not run (no GPU), gated (a wrong answer),
    wrongly timed or flagged for a TA (a time under the physical floor, a grader fault) has no
    trusted ratio and gives no entry, never a 0 that would top the board.
    """
    entries = []
    for result in grade.items:
        ratio = _measured_ratio(result)
        if ratio is not None:
            entries.append({"name": _board_name(result.item, rubric), "value": ratio, "order": "asc"})
    return entries


def _measured_ratio(result: ItemResult) -> float | None:
    evidence = result.evidence.ratio
    if evidence is None or not (result.item.check == "performance" and result.item.metric == TIME):
        return None
    if evidence.metric != TIME or result.not_run or result.regrade or evidence.below_floor:
        return None
    ratio = evidence.ratio
    value = round(ratio, 3) if isinstance(ratio, int | float) and math.isfinite(ratio) else 0.0
    return value if value > 0 else None  # as printed in the feedback (``{ratio:.3f}x``)


def _board_name(item: Item, rubric: Rubric) -> str:
    """From the rubric, not the grade, so every submission names the same columns."""
    timed = [i for i in rubric.assignments[item.assignment] if i.check == "performance" and i.metric == TIME]
    return f"{item.assignment} time / reference" if len(timed) == 1 else f"{item.name}: time / reference"


def fenced(text: str) -> str:
    """``text`` as a Markdown code block: the fence is longer than any backtick run in it, so
    no line of the text can close it (CommonMark closes only on a fence at least as long)."""
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip(chr(10))}\n{fence}"


def grader_version() -> str:
    try:
        return importlib.metadata.version("cuda-autograder")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _not_run(grade: Grade) -> str:
    """Items that could not run here, first: what they are worth and what happens next."""
    pending = [r for r in grade.items if r.not_run]
    if not pending:
        return ""
    reasons = ", ".join(dict.fromkeys(r.not_run for r in pending if r.not_run))
    points = counted(sum(r.item.points for r in pending), "point")
    return (
        f"**{points} could not be graded here ({reasons}).** "
        + (
            "A TA regrades it on a GPU; it shows 0"
            if len(pending) == 1
            else "A TA regrades them on a GPU; they show 0"
        )
        + " until then."
    )


def _summary(grade: Grade) -> str:
    """The points of the items students see now; hidden and later-shown items are only counted."""
    shown = [r for r in grade.items if r.item.visibility == "visible"]
    score, maximum = sum(r.score for r in shown), sum(r.item.points for r in shown)
    summary = f"{two_decimals(score)} / {two_decimals(maximum)} points, graded on the {grade.backend} backend"
    later = sum(r.item.points for r in grade.items if r.item.visibility != "visible")
    if later:
        hidden = counted(later, "point")
        summary += f"; not counted here: {hidden} shown after the due date or when grades are published"
    return summary


def fallback_results(rubric: Rubric | None, reason: str, elapsed_s: float = 0.0) -> Json:
    """Every known item at 0 with ``reason``: what Gradescope gets when the grader fails."""
    message = f"The autograder failed, not your submission; a TA will regrade it.\n{reason}"
    items = rubric.items if rubric is not None else ()
    tests = [_test(item, 0.0, message, False, rubric, regrade=True) for item in items if rubric is not None]
    return {
        "score": 0.0,
        "execution_time": round(elapsed_s),
        "output": fenced(for_student(message)),
        "output_format": "md",
        "extra_data": {"grader_version": grader_version()},
        "tests": tests,
    }


def _test(item: Item, score: float, output: str, passed: bool, rubric: Rubric, regrade: bool) -> Json:
    tags = [item.assignment, item.check] + (["regrade"] if regrade else [])
    return {
        "name": item.name,
        "score": score,
        "max_score": item.points,
        "status": "passed" if passed else "failed",
        "output": fenced(for_student(output)),
        "visibility": item.visibility,
        "number": _number(item, rubric),
        "tags": tags,
    }


def _number(item: Item, rubric: Rubric) -> str:
    assignment = list(rubric.assignments).index(item.assignment) + 1
    return f"{assignment}.{rubric.assignments[item.assignment].index(item) + 1}"


def write_results(path: Path, results: Json) -> None:
    """Write atomically, so a grader killed mid-write never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(results, indent=2, default=str) + "\n")
    os.replace(partial, path)
