import csv
import json
from pathlib import Path

from autograder.course.rubric import Item
from autograder.delivery.class_table import class_rows, markdown, write_csv
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.report import markdown as report_markdown


def report(path, submission, scores, regrade=()):
    items = [{"name": name, "score": score, "regrade": name in regrade} for name, score in scores.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "submission": submission,
                "backend": "emulator",
                "items": items,
                "score": sum(scores.values()),
                "max_score": 10,
            }
        )
    )
    return path


def test_rows_columns_regrade_flags_and_lowest_score_first(tmp_path):
    gradescope = "/autograder/submission"
    a = report(tmp_path / "alice/report.json", gradescope, {"vec correctness": 4, "vec bounds": 2})
    b = report(
        tmp_path / "bob/report.json", gradescope, {"vec correctness": 1, "vec perf": 0}, regrade=("vec perf",)
    )
    columns, rows = class_rows([a, b])
    assert columns == ["vec correctness", "vec bounds", "vec perf"]
    assert [r["who"] for r in rows] == [str(a), str(b)]  # the same submission path: name the reports
    table = markdown(columns, rows).splitlines()
    assert table[2].startswith(f"| {b} | 1 / 10 | 1 |  | 0 | vec perf |")
    assert table[3].startswith(f"| {a} | 6 / 10 | 4 | 2 |  |")
    write_csv(tmp_path / "class.csv", columns, rows)
    first = next(csv.DictReader((tmp_path / "class.csv").open()))
    assert first["vec bounds"] == "2" and first["vec perf"] == "" and first["regrade"] == ""


def test_scores_read_with_at_most_two_decimals(tmp_path):
    a = report(tmp_path / "a/report.json", "a", {"vec traffic": 0.70751, "vec bounds": 2})
    columns, rows = class_rows([a])
    assert markdown(columns, rows).splitlines()[2].startswith("| a | 2.71 / 10 | 0.71 | 2 |")
    items = (
        ItemResult(Item("vec", "traffic", "safety", 1, "vec traffic"), 0.70751, ""),
        ItemResult(Item("vec", "bounds", "safety", 9, "vec bounds"), 2.0, ""),
    )
    text = report_markdown(Grade(items, "emulator", 1, elapsed_s=1.0), Path("a"))
    assert "Score **2.71 / 10**" in text and "| vec traffic | 0.71 / 1 |  |" in text
    assert "0.7075" not in text


def test_the_csv_shows_text_that_looks_like_a_formula_as_text(tmp_path):
    crafted = report(tmp_path / "=cmd/report.json", '=HYPERLINK("http://x")', {"vec bounds": 2})
    columns, rows = class_rows([crafted])
    write_csv(tmp_path / "class.csv", columns, rows)
    with (tmp_path / "class.csv").open() as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    assert '\'=HYPERLINK("http://x")' in cells and "2" in cells  # the score stays a number
    assert not any(cell[:1] in "=+-@\t\r" for cell in cells if cell)
