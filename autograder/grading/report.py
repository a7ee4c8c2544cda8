"""The TA report of one graded submission, in JSON and Markdown.

Unlike ``results.json`` it carries everything: the secret seed of the run and each case's
seed (to reproduce the inputs; the sizes a group drew come from the run's seed, and the case
tables mark them), every case's evidence (shapes, max errors, first wrong index, unwritten
outputs, modified inputs), every finding with its line, counters and ratios, and which items
are flagged for regrading. Its JSON holds each item's evidence as ``Evidence.to_json`` writes it
(``autograder class-report`` and ``autograder table`` read those files); the Markdown's case
tables come from the typed evidence.
"""

from __future__ import annotations

import json
from pathlib import Path

from autograder.feedback import ITEM_OUTPUT_BYTES, capped, two_decimals
from autograder.grading.evidence import CaseRecord, Json
from autograder.grading.grade import Grade
from autograder.grading.performance import PerformanceEvidence, is_timed


def report_data(grade: Grade, submission: Path) -> Json:
    return {
        "submission": str(submission),
        "backend": grade.backend,
        "seed": grade.seed,
        "elapsed_s": round(grade.elapsed_s, 3),
        "score": round(sum(r.score for r in grade.items), 4),
        "max_score": sum(r.item.points for r in grade.items),
        "notes": grade.notes,
        "items": [
            {
                "assignment": r.item.assignment,
                "name": r.item.name,
                "check": r.item.check,
                "cases": r.item.cases,
                "score": r.score,
                "max_score": r.item.points,
                "regrade": r.regrade,
                "not_run": r.not_run,
                "output": capped(r.output, ITEM_OUTPUT_BYTES),
                "evidence": r.evidence.to_json(),
            }
            for r in grade.items
        ],
    }


def markdown(grade: Grade, submission: Path) -> str:
    """The report as Markdown: the JSON's figures, and each item's cases and ratio."""
    data = report_data(grade, submission)
    lines = [
        f"# Grading report: {data['submission']}",
        "",
        f"Score **{two_decimals(data['score'])} / {two_decimals(data['max_score'])}** on the "
        f"`{data['backend']}` backend in "
        f"{data['elapsed_s']:.1f} s; secret seed `{data['seed']}`.",
        *[f"- {note}" for note in data["notes"]],
        "",
        "| item | score | regrade |",
        "|---|---|---|",
        *[
            f"| {i['name']} | {two_decimals(i['score'])} / {two_decimals(i['max_score'])} "
            f"| {'yes' if i['regrade'] else ''} |"
            for i in data["items"]
        ],
    ]
    for item, result in zip(data["items"], grade.items, strict=True):
        lines += ["", f"## {item['name']}", "", "```", item["output"], "```"]
        lines += _cases_table(result.evidence.cases or ())
        if result.evidence.ratio is not None:
            lines += _timings_table(result.evidence.ratio)
            lines += ["", f"ratio evidence: `{json.dumps(result.evidence.ratio.to_dict(), default=str)}`"]
    return "\n".join(lines) + "\n"


def _timings_table(ratio: PerformanceEvidence) -> list[str]:
    """A timed item's cases as a TA reads them: both medians, the ratio and its standard error,
    the launches of each kernel, and whether the ratio was decided outside the scored range (its
    last digits not needed for the score: ``gpu_timing.stop_reason``)."""
    if not is_timed(ratio.metric) or not ratio.cases:  # a counted ratio, or not timed here
        return []
    lines = [
        "",
        "| timed case | student ms | reference ms | ratio | ± | launches each | decided |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in ratio.cases:
        params = ", ".join(f"{k}={v}" for k, v in c["case"].items())
        decided = ""
        if c.get("decided"):  # outside the range score_timings scored it between
            below = c["ratio"] < (ratio.full_at or 0.0)
            decided = f"below {ratio.full_at:g}x" if below else f"above {ratio.zero_at:g}x"
        spread = c.get("ratio_spread")  # absent from a GPU service's answer before 2026-12-04
        lines.append(
            f"| {params} | {c['student_ms']:.4g} | {c['reference_ms']:.4g} | {c['ratio']:.4f} "
            f"| {'' if spread is None else f'{100 * spread:.2f} %'} | {c['repeats']} | {decided} |"
        )
    return lines


def _cases_table(cases: tuple[CaseRecord, ...]) -> list[str]:
    if not cases:
        return []
    lines = [
        "",
        "| case | backend | seed | correct | max abs error | first wrong | unwritten | findings |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        worst = max((o.max_abs_error or 0.0 for o in c.outputs), default=None)
        first = next(
            (f"{o.first_wrong} = {o.got:.7g} (want {o.expected:.7g})" for o in c.outputs if o.first_wrong),
            "",
        )
        params = ", ".join(f"{k}={v}" for k, v in c.params.items())
        params = f"{c.group}: {params}" + (" (drawn)" if c.drawn else "")
        status = "yes" if c.correct else f"no{': ' + c.error.splitlines()[0] if c.error else ''}"
        error = "" if worst is None else f"{worst:.3g}"
        lines.append(
            f"| {params} | {c.backend} | {c.seed} | {status} | {error} "
            f"| {first} | {sum(o.unwritten for o in c.outputs)} | {len(c.findings)} |"
        )
    findings = [f for c in cases for f in c.findings]
    lines += ["", *[f"- line {f.line}: {f.kind}: {f.message}" for f in findings]]
    return lines


def write_report(path: Path, grade: Grade, submission: Path) -> tuple[Path, Path]:
    """Write ``<path>.json`` and ``<path>.md`` (a ``.json``/``.md`` suffix on ``path`` is replaced)."""
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".json", ".md") else path
    stem.parent.mkdir(parents=True, exist_ok=True)
    data = report_data(grade, submission)
    json_path, md_path = stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".md")
    json_path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    md_path.write_text(markdown(grade, submission))
    return json_path, md_path
