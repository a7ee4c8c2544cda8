"""The HTML class report of a made-up class (``synthetic_class``): what each page holds, read as HTML.

How the pages look and that they load without a console error in a browser:
tests/delivery/test_class_report_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

pytest.importorskip("jinja2", reason="the class report needs the batch extra: pip install -e '.[batch]'")
pytest.importorskip("matplotlib", reason="the class report needs the batch extra: pip install -e '.[batch]'")

from click.testing import CliRunner

from autograder.cli import main
from autograder.delivery import class_report

from .synthetic_class import (
    FAILED,
    GONE,
    HOSTILE,
    HOSTILE_NAME,
    PLAIN,
    PRINTS,
    SCRIPT,
    STUDENTS,
    make_class,
    student_id,
)

VOID = {"img", "meta", "br", "hr", "input", "link"}


class Element:
    def __init__(self, tag: str, attrs: dict, within: set[str]):
        self.tag, self.attrs, self.within, self.text = tag, attrs, within, ""

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())


class Page(HTMLParser):
    """Every element of a page with its attributes and its text (that of its children included)."""

    def __init__(self, path: Path):
        super().__init__()
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(path.read_text(encoding="utf-8"))
        assert not self._open, [e.tag for e in self._open]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, dict(attrs), {e.attrs["id"] for e in self._open if "id" in e.attrs})
        self.elements.append(element)
        if tag not in VOID:
            self._open.append(element)

    def handle_endtag(self, tag):
        assert self._open and self._open[-1].tag == tag, f"</{tag}> closes <{self._open[-1].tag}>"
        self._open.pop()

    def handle_data(self, data):
        for element in self._open:
            element.text += data

    def all(self, tag: str, css_class: str | None = None, within: str | None = None) -> list[Element]:
        """The ``tag`` elements, of class ``css_class``, inside the element whose id is ``within``."""
        return [
            e
            for e in self.elements
            if e.tag == tag
            and (css_class is None or css_class in e.classes)
            and (within is None or within in e.within)
        ]

    def by_id(self, name: str) -> Element:
        return next(e for e in self.elements if e.attrs.get("id") == name)

    @property
    def text(self) -> str:
        return self.all("body")[0].text


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    batch_dir = make_class(tmp_path_factory.mktemp("class"))
    index = class_report.write_class_report(batch_dir)
    assert index == batch_dir / "report" / "index.html"
    return index


@pytest.fixture(scope="module")
def index(rendered) -> Page:
    return Page(rendered)


def student_page(rendered: Path, index: int) -> Page:
    return Page(rendered.parent / "students" / f"{student_id(index)}.html")


def test_the_class_page_has_every_section_figure_and_table(index):
    sections = [e.attrs["id"] for e in index.all("section")]
    assert sections == ["totals", "items", "ratios", "findings", "students", "regrades", "failed"]
    figures = index.all("img")
    # totals with each assignment's; each assignment's items; each assignment's ratios
    assert len(figures) == 1 + 2 + 2
    for figure in figures:
        assert figure.attrs["alt"]
        head, _, data = figure.attrs["src"].partition(",")
        assert head == "data:image/svg+xml;base64"
        assert b"<svg" in base64.b64decode(data)
    tables = index.all("table")
    assert len(tables) == 2 + 1 + 1 + 1  # items of each assignment, students, regrades, failed
    assert all(len(t.text.strip()) > 20 for t in tables)
    assert "vector_add performance (perf)" in index.by_id("ratios").text


def test_every_student_has_a_row_and_a_page_and_every_link_leads_somewhere(rendered, index):
    assert len(index.all("tr", within="student-table")) == 1 + STUDENTS
    for link in index.all("a"):
        target = link.attrs["href"].split("#")[0]
        assert not target or (rendered.parent / unquote(target)).is_file(), link.attrs["href"]
    assert sorted(p.name for p in (rendered.parent / "students").iterdir()) == sorted(
        f"{student_id(i)}.html" for i in range(STUDENTS)
    )
    plain = student_id(PLAIN)
    assert any(link.text == plain for link in index.all("a")), (
        "a submission without submitters is named by id"
    )


def test_the_same_bug_on_other_lines_in_many_files_is_one_finding_with_one_excerpt(index):
    findings = index.all("article", "finding")
    assert len(findings) == 3, [f.text for f in findings]
    first = findings[0].text
    assert "10 submissions · window_sum · barriers: barrier divergence" in first
    excerpt = index.all("span", "hit", within="findings")
    assert len(excerpt) == 3 and "__syncthreads();" in excerpt[0].text
    bounds = findings[1].text
    assert "window_sum · bounds: out of bounds read" in bounds and "x[i + BLOCK]" in bounds
    assert "8 submissions · vector_add · bounds: out of bounds write" in findings[2].text
    assert "window_sum.cu:" not in first  # the line is shown apart, not twice


def test_the_student_page_shows_items_outputs_findings_and_the_lines_they_point_at(rendered):
    page = student_page(rendered, 9)  # the early return in window_sum
    assert page.all("h1")[0].text == "Student 09"
    items = [row.text for row in page.all("tr")]
    assert any("window_sum bounds (safety)" in row and "0 / 2" in row for row in items)
    outputs = page.all("pre", "output")
    assert len(outputs) == 5 + 6 and any("0 of 2 cases correct" in o.text for o in outputs)
    findings = [f.text for f in page.all("div", "finding")]
    assert len(findings) == 2
    window_sum = (rendered.parents[1] / student_id(9) / "source" / "window_sum.cu").read_text().splitlines()
    for hit in page.all("span", "hit"):
        number = int(re.match(r"\d+", hit.text).group())
        assert hit.text[len(str(number)) :] == window_sum[number - 1]
    assert {re.match(r"\d+", h.text).group() for h in page.all("span", "hit")} == {
        re.search(r"line (\d+)", f).group(1) for f in findings
    }


def test_what_a_student_wrote_is_text_never_markup(rendered, index):
    for page in [rendered] + [
        rendered.parent / "students" / f"{student_id(i)}.html" for i in (PRINTS, HOSTILE)
    ]:
        html = page.read_text()
        assert SCRIPT not in html and HOSTILE_NAME not in html
        assert html.count("<script") == 1  # ours, allowed by its hash alone
        script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"script-src 'sha256-{digest}'" in html
        assert "default-src 'none'" in html
    printed = student_page(rendered, PRINTS)
    assert any(SCRIPT in o.text for o in printed.all("pre", "output"))
    assert any(link.text == HOSTILE_NAME for link in index.all("a"))
    assert "&lt;img src=x onerror=alert(2)&gt;" in rendered.read_text()


def test_a_submission_no_longer_on_disk_is_said_and_the_excerpt_comes_from_another(rendered, index):
    gone = student_page(rendered, GONE)
    assert "is no longer on disk" in gone.by_id("window_sum").text
    assert not gone.all("pre", "source")
    assert len(gone.all("div", "finding")) == 2  # its findings, without their lines
    first = index.all("article", "finding")[0].text
    assert "Affected: Student 01, Student 05," in first  # the first affected, whose file is gone
    assert "Student 05, window_sum.cu line" in first  # so the excerpt is the next one's


def test_failed_submissions_are_listed_with_why(rendered, index):
    failed = index.by_id("failed")
    assert "Student 39" in failed.text and "WorkerCrashedError" in failed.text
    page = student_page(rendered, FAILED)
    assert "Not graded: the grading task failed: WorkerCrashedError" in page.text
    log = next(a.attrs["href"] for a in page.all("a") if a.text == "the grader's log")
    assert "WorkerCrashedError" in (rendered.parent / "students" / unquote(log)).read_text()
    row = next(r for r in index.all("tr", within="student-table") if "Student 39" in r.text)
    assert "failed" in row.text and "graded" not in row.text


def test_the_regrade_list_groups_students_by_item_and_reason(index):
    rows = [row.text for row in index.all("tr", within="regrades")][1:]
    assert len(rows) == 3
    not_run = [r for r in rows if "not run: needs a GPU" in r]
    assert len(not_run) == 2 and all("Student 00" in r and "Student 06" in r for r in not_run)
    assert any("physical limit" in r and "Student 07" in r for r in rows)


def test_a_ratio_panel_draws_the_rubric_thresholds_on_a_log_axis():
    item = {"name": "t", "metric": "time", "full_at": 1.3, "zero_at": 3.0}
    fig = class_report.drawn([class_report.ratio_panel(item, [0.9, 1.2, 2.5, 5.0])], 1)
    axes = fig.axes[0]
    assert axes.get_xscale() == "log"
    x = class_report.TIMES
    lines = {line.get_label(): line.get_xdata()[0] for line in axes.get_lines()}
    assert lines == {f"reference (1{x})": 1.0, f"full marks ≤ 1.3{x}": 1.3, f"no marks ≥ 3{x}": 3.0}
    assert axes.get_xlim()[0] < 0.9 and axes.get_xlim()[1] > 5.0
    fig.draw_without_rendering()
    assert {f"1{x}", f"1.5{x}", f"3{x}"} <= {t.get_text() for t in axes.get_xticklabels()}


def test_ratios_a_log_axis_cannot_place_are_drawn_at_its_edges():
    """A count ratio of 0 (the student's kernel made no bank conflict) broke the whole class
    report (ZeroDivisionError on the log axis's bins); infinity and NaN likewise."""
    item = {"name": "t", "metric": "bank_conflicts", "full_at": 1.0, "zero_at": 4.0}
    panel = class_report.ratio_panel(item, [0.0, 0.5, 2.0, math.inf, math.nan])
    assert 0 < panel.low < 0.5 and panel.high == 4.0 * 1.25
    assert panel.values == [panel.low, 0.5, 2.0, panel.high]
    class_report.drawn([panel], 1).draw_without_rendering()


def test_finding_patterns_forget_location_and_numbers():
    a = "window_sum.cu:7: thread (0,0,0) of block (255,0,0) read x[65536] past its end (x has 65540 elements)"
    b = "window_sum.cu:12: thread (3,0,0) of block (7,0,0) read x[1024] past its end (x has 1004 elements)"
    assert class_report.pattern(a) == class_report.pattern(b)
    assert class_report.pattern(a).startswith("thread (#,#,#)")


def test_a_class_with_nothing_graded_still_renders(tmp_path):
    (tmp_path / "class.json").write_text(
        json.dumps(
            {
                "course": "c",
                "seed": 1,
                "backend": "emulator",
                "rubric": {"vec": [{"name": "vec correctness", "check": "correctness", "points": 2.0}]},
                "submissions": [
                    {"id": "s1", "submitters": [], "status": "failed", "reason": "boom", "source": "/nowhere"}
                ],
            }
        )
    )
    page = Page(class_report.write_class_report(tmp_path))
    assert not page.all("img")
    assert "No submission was graded." in page.by_id("totals").text
    assert "boom" in page.by_id("failed").text


def test_the_command_writes_where_asked_and_refuses_a_folder_that_is_no_class(tmp_path, rendered):
    runner = CliRunner()
    done = runner.invoke(main, ["class-report", str(rendered.parents[1]), "--out", str(tmp_path / "pages")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "pages" / "index.html").is_file()
    assert len(list((tmp_path / "pages" / "students").glob("*.html"))) == STUDENTS
    refused = runner.invoke(main, ["class-report", str(tmp_path / "pages")])
    assert refused.exit_code == 1 and "holds no class.json" in refused.output
    with pytest.raises(class_report.ClassReportError, match="not a graded class"):
        (tmp_path / "pages" / "class.json").write_text("[]")
        class_report.write_class_report(tmp_path / "pages")
