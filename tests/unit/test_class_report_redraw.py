"""The class report drawn again: only the pages whose inputs changed, each the page a full draw writes;
where it reads a submission's source from (class.json's ``source``, never outside DIR); how it
groups findings and labels its histograms."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jinja2", reason="the class report needs the batch extra: pip install -e '.[batch]'")
pytest.importorskip("matplotlib", reason="the class report needs the batch extra: pip install -e '.[batch]'")

from autograder.delivery import class_report

from .synthetic_class import make_class, student_id

ROOT = Path(__file__).resolve().parents[2]
SMALL = 6  # students: the early return is in window_sum of students 1 (whose source is gone) and 5


@pytest.fixture
def small(tmp_path, monkeypatch) -> Path:
    """A class of ``SMALL``, drawn by the code as it is now: a colleague's edit to the grader while a
    test runs would rightly draw every page again."""
    now = class_report.renderer_digest()
    monkeypatch.setattr(class_report, "renderer_digest", lambda: now)
    return make_class(tmp_path, students=SMALL)


@pytest.fixture
def sketched(monkeypatch):
    """Figures as their panels' text, not drawn (seconds each): for tests of which pages are drawn."""
    monkeypatch.setattr(class_report, "figure", lambda panels, columns=3: f"data:,{panels}")


def pages(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def drawn(batch_dir: Path, out: Path | None = None) -> list[str]:
    out = out or batch_dir / "report"
    return class_report.redraw(class_report.read_class(batch_dir), batch_dir, out)


def student(index: int) -> str:
    return f"students/{student_id(index)}.html"


def regraded(batch_dir: Path, index: int) -> None:
    """The student's report as a regrade after a fix writes it: another score, another output."""
    path = batch_dir / student_id(index) / "report.json"
    report = json.loads(path.read_text())
    report["items"][0] |= {"score": 1.5, "output": "1 of 2 cases correct after the fix"}
    path.write_text(json.dumps(report))


def edited_class(batch_dir: Path, edit) -> None:
    data = json.loads((batch_dir / "class.json").read_text())
    edit(data)
    (batch_dir / "class.json").write_text(json.dumps(data))


# ---- only what changed is drawn again ----------------------------------------------------------


def test_pages_drawn_in_a_process_per_core_are_the_pages_drawn_in_one(small, monkeypatch):
    """From PARALLEL_PAGES pages on, pages are drawn by worker processes (here two, from the first
    page): every page, each the bytes this process draws."""
    class_report.write_class_report(small, small / "alone")
    monkeypatch.setattr(class_report, "PARALLEL_PAGES", 1)
    monkeypatch.setattr(class_report, "_cores", lambda: 2)
    workers = []
    pool = class_report.ProcessPoolExecutor
    monkeypatch.setattr(
        class_report, "ProcessPoolExecutor", lambda n, *a, **k: workers.append(n) or pool(n, *a, **k)
    )
    class_report.write_class_report(small, small / "spread")
    assert workers == [2] and pages(small / "spread") == pages(small / "alone")
    assert len(pages(small / "alone")) == SMALL + 2  # the pages and their digests


def test_a_current_class_draws_nothing_and_one_changed_student_draws_their_page_and_the_index(small):
    first = drawn(small)
    assert sorted(first) == sorted(["index.html", *(student(i) for i in range(SMALL))])
    assert drawn(small) == []
    regraded(small, 2)
    assert sorted(drawn(small)) == ["index.html", student(2)]
    assert "after the fix" in (small / "report" / student(2)).read_text()
    full = small / "full"  # beside report/, so the links to the grader's logs are the same
    class_report.write_class_report(small, full)
    assert pages(small / "report") == pages(full)


def test_what_the_pages_are_drawn_from_draws_them_again_when_it_changes(small, sketched):
    drawn(small)
    (small / student_id(5) / "source" / "window_sum.cu").write_text("// rewritten\n")
    assert sorted(drawn(small)) == ["index.html", student(5)]  # the index quotes student 5's source
    edited_class(small, lambda data: data["submissions"][3]["submitters"][0].update(name="Renamed"))
    assert sorted(drawn(small)) == ["index.html", student(3)]
    (small / "report" / student(4)).unlink()
    assert drawn(small) == [student(4)]
    edited_class(small, lambda data: data.update(course="Another course"))
    assert len(drawn(small)) == 1 + SMALL
    (small / "report" / class_report.DIGESTS).write_text("{not json")
    assert len(drawn(small)) == 1 + SMALL


def test_a_submission_gone_from_the_class_takes_its_page_with_it(small, sketched):
    drawn(small)
    edited_class(small, lambda data: data["submissions"].pop(0))
    assert drawn(small) == ["index.html"]
    assert not (small / "report" / student(0)).exists()
    assert len(list((small / "report" / "students").iterdir())) == SMALL - 1


def test_a_class_whose_pages_are_current_is_read_without_matplotlib(small, sketched):
    drawn(small)
    check = (
        "import sys; from pathlib import Path; from autograder.delivery import class_report as r; "
        f"r.write_class_report(Path({str(small)!r})); "
        "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


# ---- the source of a submission: relative to DIR, never outside it -------------------------------


def sources_of(batch_dir: Path, index: int, source: str) -> dict[str, class_report.Source]:
    edited_class(batch_dir, lambda data: data["submissions"][index].update(source=source))
    return next(s for s in class_report.read_class(batch_dir).students if s.id == student_id(index)).sources


def test_a_source_is_read_relative_to_the_class_folder_or_where_an_older_class_json_put_it(small):
    relative = sources_of(small, 5, f"{student_id(5)}/source")
    assert relative["window_sum"].name == "window_sum.cu" and relative["window_sum"].lines
    absolute = sources_of(small, 5, str((small / student_id(5) / "source").resolve()))
    assert absolute == relative


def test_a_source_outside_the_class_folder_is_never_read(small, tmp_path, sketched):
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "window_sum.cu").write_text("__global__ void window_sum() { /* SECRET */ }\n")
    link = small / student_id(2) / "source"
    os.symlink(secret, small / student_id(2) / "linked")
    for index, source in ((1, "../elsewhere"), (2, f"{student_id(2)}/linked"), (3, str(secret)), (4, "/")):
        for found in sources_of(small, index, source).values():
            assert found.lines == () and "the source is not available" in found.problem, source
            assert f"{source} is outside the class folder" in found.problem
    assert link.is_dir()
    assert "names no folder" in sources_of(small, 0, ["/etc"])["window_sum"].problem
    class_report.write_class_report(small)
    assert not any(b"SECRET" in page for page in pages(small / "report").values())
    page = (small / "report" / student(1)).read_text()
    assert "No source: the source is not available: ../elsewhere is outside the class folder" in page
    index = (small / "report" / "index.html").read_text()  # student 2 alone writes past c's end
    assert (
        "No source excerpt: no affected submission's file is available (gone from disk, or outside" in index
    )


# ---- findings and histograms -------------------------------------------------------------------


def with_finding(index: int, message: str) -> class_report.Student:
    case = {
        "group": "safety",
        "label": "n=1",
        "findings": [{"kind": "out_of_bounds_read", "message": message}],
    }
    item = {"name": "vec bounds", "assignment": "vec", "check": "bounds", "evidence": {"cases": [case]}}
    return class_report.Student(f"s{index}", f"s{index}", [], None, {"items": [item]})


def test_one_bug_at_other_sizes_is_one_finding():
    one = "thread (0,0,0) of block (0,0,0) read a[1] past its end (a has 1 element)"
    ten = "thread (0,0,0) of block (0,0,0) read a[10] past its end (a has 10 elements)"
    assert class_report.pattern(one) == class_report.pattern(ten)
    groups = class_report.finding_groups([with_finding(0, one), with_finding(1, ten)])
    assert [len(g.students) for g in groups] == [2]
    assert class_report.pattern("1 warp, 2 classes") == class_report.pattern("3 warps, 1 class")
    assert class_report.pattern("read 4 bytes") != class_report.pattern("wrote 4 bytes")


def test_the_histograms_count_submissions():
    panel = class_report.score_panel("total", [1.0, 2.0], 4.0)
    assert class_report.drawn([panel], 1).axes[0].get_ylabel() == "submissions"
