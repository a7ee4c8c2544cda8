"""The class table: one row per graded submission, one column per rubric item.

Built from the TA reports (``report.json`` of each ``autograder grade --report``), so a TA
can sort a class by any item, see which submissions are flagged for regrading, and open
the report of any row for its evidence.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from autograder.feedback import text_cell, two_decimals

_REPORT_KEYS = {"submission", "backend", "score", "max_score", "items"}


def class_rows(reports: list[Path]) -> tuple[list[str], list[dict]]:
    """The column names (items in rubric order) and one row per report."""
    columns: list[str] = []
    rows = []
    for path in reports:
        data = read_report(path)
        row = {
            "report": str(path),
            "submission": data["submission"],
            "backend": data["backend"],
            "score": data["score"],
            "max_score": data["max_score"],
            "regrade": "; ".join(i["name"] for i in data["items"] if i["regrade"]),
        }
        for item in data["items"]:
            if item["name"] not in columns:
                columns.append(item["name"])
            row[item["name"]] = item["score"]
        rows.append(row)
    submissions = [row["submission"] for row in rows]
    for row in rows:  # on Gradescope every report says /autograder/submission: name the report then
        row["who"] = row["submission"] if submissions.count(row["submission"]) == 1 else row["report"]
    return columns, rows


def read_report(path: Path) -> dict:
    """A TA report's data, or a ValueError naming the file that is none."""
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not JSON ({e})") from e
    if not isinstance(data, dict) or not data.keys() >= _REPORT_KEYS:
        raise ValueError(f"{path}: not a TA report (the REPORT.json of `autograder grade --report REPORT`)")
    return data


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    fields = ["who", "submission", "score", "max_score", *columns, "regrade", "backend", "report"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, restval="")
        writer.writerow({name: text_cell(name) for name in fields})
        writer.writerows(
            {k: text_cell(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows
        )


def markdown(columns: list[str], rows: list[dict]) -> str:
    """Submissions by score (lowest first, as a TA reads them), items as columns."""
    head = ["submission", "score", *columns, "regrade"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in sorted(rows, key=lambda r: (r["score"], r["who"])):
        cells = [row["who"], f"{two_decimals(row['score'])} / {two_decimals(row['max_score'])}"]
        cells += [two_decimals(row[c]) if c in row else "" for c in columns] + [row["regrade"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
