"""The class report: a graded class folder (``autograder batch``'s DIR) as HTML pages a TA reads.

``<out>/index.html`` (default ``DIR/report/``): the class at a glance, histograms of the
totals, of each assignment and of each item, the distribution of each traffic and performance
ratio against the rubric's ``full_at`` and ``zero_at``, the most frequent findings with a
source excerpt and the students they affect, every student in a table, the items flagged for
regrading and the submissions that failed. ``<out>/students/<id>.html``: one student's items,
what each printed, its findings and the source lines each finding points at, and per
assignment the roofline of their kernel beside the reference's (``roofline.py``; the
reference's counts are ``class.json``'s ``ledger``).

The pages open from disk with no server: each figure is an SVG drawn by matplotlib (no pyplot
state) inside a ``data:`` URI, the style and the one script (sorting tables) are inline, and a
Content-Security-Policy lets nothing else load or run. Everything a student wrote (names,
printed text, file names, source) reaches the page through jinja2's autoescape.

Reads ``DIR/class.json`` and each graded submission's ``report.json`` (``report.report_data``);
a submission's source is read again from its folder (``source`` in ``class.json``, relative to
DIR, and never a folder outside it) when it is still there, the assignment's file found as
grading found it (``discovery``; a ``kernels`` map in ``class.json`` names each assignment's
kernel, else the kernel is named as its assignment). Only the assignments some report graded
are shown.

Drawn again (every ``autograder batch`` draws it), only the pages whose inputs changed are:
``<out>/digests.json`` keeps, per page, the digest of everything it is drawn from, so a class
whose pages are all current is read but not drawn (no matplotlib imported: 0.04 s for 12
submissions). Needs the ``batch`` extra (jinja2, matplotlib): nothing on the grading path imports
this module.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import importlib.metadata
import io
import json
import math
import multiprocessing
import os
import re
import statistics
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from autograder import contract, feedback
from autograder.contract import FINDING_CHECKS
from autograder.course import discovery, policy
from autograder.delivery import class_table
from autograder.delivery.class_table import read_report
from autograder.errors import AutograderError
from autograder.feedback import two_decimals
from autograder.profile import roofline

if TYPE_CHECKING:  # imported where a figure is drawn: a class whose pages are all current needs none
    from matplotlib.figure import Figure

CLASS_FILE = "class.json"
DIGESTS = "digests.json"  # in the report's folder: per page, the digest of what it was drawn from
CONTEXT_LINES = 3  # source lines shown either side of a finding's line
MAX_FINDING_GROUPS = 15  # the most frequent findings shown on the class page
MAX_SOURCE_LINES = 2000  # of a student's file on their page
MAX_LINE_CHARS = 300  # of one source line
PARALLEL_PAGES = 8  # pages to draw from which they are spread over a process per core
BAR, FLAG, FULL, ZERO = "#4C72B0", "#E0A800", "#2E7D32", "#C62828"
TIMES, NONE = "\u00d7", "\u2013"  # x as in 1.5x, and the dash of a number that is not there
RATIO_TICKS = (0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 4, 6, 8, 10, 15, 20, 30, 50, 100, 200, 500, 1000)

_LOCATION = re.compile(r"^[^\s:]+:\d+:\s*")  # "window_sum.cu:7: " before a finding's sentence
_NUMBER = re.compile(r"\d+")
_COUNTED = re.compile(r"\d+(\s+)([A-Za-z]+)")  # "10 elements": a number and the word it inflects


class ClassReportError(AutograderError):
    """DIR is not a graded class folder; the message says why."""


def write_class_report(batch_dir: Path, out: Path | None = None) -> Path:
    """Write the class page and one page per student under ``out`` (default ``DIR/report``); only
    the pages whose inputs changed since the last draw into ``out`` are drawn again (``redraw``)."""
    batch_dir = Path(batch_dir)
    out = Path(out) if out else batch_dir / "report"
    redraw(read_class(batch_dir), batch_dir, out)
    return out / "index.html"


def redraw(graded: Class, batch_dir: Path, out: Path) -> list[str]:
    """Draw each page (named relative to ``out``) whose digest is not the one ``DIGESTS`` recorded
    for it, or whose file is gone, and return their names. A page's digest covers everything it is
    drawn from (``page_digests``), so a page kept is byte for byte the page a full draw would write;
    a student's page of a submission no longer in the class is removed."""
    (out / "students").mkdir(parents=True, exist_ok=True)
    logs = {s.id: _log_href(batch_dir, out, s) for s in graded.students}
    digests = page_digests(graded, logs)
    before = _read_digests(out / DIGESTS)
    stale = [
        name for name, digest in digests.items() if before.get(name) != digest or not (out / name).is_file()
    ]
    if stale:  # forgotten first: a draw interrupted now leaves no digest claiming a half-written page
        _write_atomically(out / DIGESTS, {name: d for name, d in before.items() if name not in stale})
        _draw_pages(graded, out, stale, logs)
    for page in (out / "students").glob("*.html"):
        if f"students/{page.name}" not in digests:
            page.unlink()
    if digests != before:
        _write_atomically(out / DIGESTS, digests)
    return stale


def _draw_pages(graded: Class, out: Path, names: list[str], logs: dict[str, str | None]) -> None:
    """Draw the pages ``names``: in this process, or, from ``PARALLEL_PAGES`` pages on, spread over
    a process per core (a page is drawn from the class alone, and its figures cost matplotlib about
    a second a page for every assignment: 300 students on one core are most of an hour)."""
    workers = min(len(names), _cores())
    if len(names) < PARALLEL_PAGES or workers < 2:
        _Drawer(graded, out, logs).draw_all(names)
        return
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that may run Ray's threads
    with ProcessPoolExecutor(workers, spawn, initializer=_Drawer.start, initargs=(graded, out, logs)) as pool:
        list(pool.map(_Drawer.draw_in_worker, [names[k::workers] for k in range(workers)]))  # raises theirs


def _cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _Drawer:
    """Draws pages of one class into ``out``; one per worker process when pages are drawn in parallel."""

    current: _Drawer | None = None  # a worker's, set by ``start``

    def __init__(self, graded: Class, out: Path, logs: dict[str, str | None]):
        self.graded, self.out, self.logs, self.pages = graded, out, logs, _Pages()
        self.students = {f"students/{s.id}.html": s for s in graded.students}

    @classmethod
    def start(cls, graded: Class, out: Path, logs: dict[str, str | None]) -> None:
        cls.current = cls(graded, out, logs)

    @classmethod
    def draw_in_worker(cls, names: list[str]) -> None:
        assert cls.current is not None, "a worker's drawer is set by its initializer"
        cls.current.draw_all(names)

    def draw_all(self, names: list[str]) -> None:
        for name in names:
            student = self.students.get(name)
            page = (
                _student_page(self.pages, self.graded, student, self.logs[student.id])
                if student
                else _index_page(self.pages, self.graded)
            )
            (self.out / name).write_text(page, encoding="utf-8")


def _log_href(batch_dir: Path, out: Path, student: Student) -> str | None:
    """The link to what `grade` printed for the student (why it failed, for one), where it is."""
    log = batch_dir / student.folder / "grade.log"
    return quote(os.path.relpath(log, out / "students")) if log.is_file() else None


def _student_page(pages: _Pages, graded: Class, student: Student, log: str | None) -> str:
    figures = rooflines(graded, student) if student.report else {}
    return pages.render("class_student.html", c=graded, s=student, root="../", log=log, rooflines=figures)


def _index_page(pages: _Pages, graded: Class) -> str:
    return pages.render("class_index.html", **class_context(graded))


# ---- what each page is drawn from --------------------------------------------------------------


def page_digests(graded: Class, logs: dict[str, str | None]) -> dict[str, str]:
    """Per page, the digest of its inputs: the code and templates that draw it, the class.json fields
    it shows, and per student their entry, report, sources and log; the class page's covers every
    student's."""
    drawer = renderer_digest()
    shown = {"course": graded.course, "rubric": graded.rubric, "ledger": graded.ledger}
    students = {
        f"students/{s.id}.html": _digest(drawer, shown, _student_inputs(s), logs[s.id])
        for s in graded.students
    }
    everything = {**shown, "seed": graded.seed, "backend": graded.backend}
    return {"index.html": _digest(drawer, everything, list(students.items()))} | students


def _student_inputs(student: Student) -> dict:
    return {
        "id": student.id,
        "folder": student.folder,
        "submitters": student.submitters,
        "reason": student.reason,
        "report": student.report,
        "sources": {a: dataclasses.asdict(source) for a, source in sorted(student.sources.items())},
    }


def renderer_digest() -> str:
    """What draws the pages: the code of this module and of those it draws with, the templates, and
    the versions of the grader, jinja2, markupsafe (the escaping) and matplotlib (the figures' SVG);
    a change to any draws every page again."""
    digest = hashlib.sha256()
    drawers = (sys.modules[__name__], discovery, policy, roofline, feedback, class_table, contract)
    files = [Path(module.__file__) for module in drawers]
    files += sorted((Path(__file__).parent / "templates").iterdir())
    for path in files:
        digest.update(f"{path.name}\0".encode() + path.read_bytes())
    for library in ("cuda-autograder", "jinja2", "markupsafe", "matplotlib"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):  # a grader run from its checkout
            digest.update(f"{library} {importlib.metadata.version(library)}\0".encode())
    return digest.hexdigest()


def _digest(*inputs) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def _read_digests(path: Path) -> dict[str, str]:
    """The digests of the last draw; none (so every page is drawn) where there is no readable file."""
    with contextlib.suppress(OSError, ValueError):
        digests = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(digests, dict):
            return digests
    return {}


def _write_atomically(path: Path, digests: dict[str, str]) -> None:
    """Whole or not at all: a draw interrupted while writing leaves the digests before it."""
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(json.dumps(digests, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(scratch, path)


# ---- the class, read from DIR ------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A student's file of one assignment, as it is now in their submission folder."""

    name: str | None = None  # relative to the submission
    lines: tuple[str, ...] = ()
    problem: str | None = None  # why there is none

    def excerpt(self, marked: Iterable[int], around: int | None = None) -> list[tuple[int, str, bool]]:
        """``(number, text, marked)`` of the lines ``CONTEXT_LINES`` around ``around``, or all."""
        marked = set(marked)
        first, last = (
            (1, len(self.lines)) if around is None else (around - CONTEXT_LINES, around + CONTEXT_LINES)
        )
        return [
            (n, self.lines[n - 1][:MAX_LINE_CHARS], n in marked)
            for n in range(max(first, 1), min(last, len(self.lines), MAX_SOURCE_LINES) + 1)
        ]


@dataclass(frozen=True)
class Seen:
    """A finding of one student's assignment, once for all the items and cases that reported it."""

    assignment: str
    check: str
    kind: str
    pattern: str  # the message without its location and numbers: what groups it across students
    message: str
    line: int | None
    items: tuple[str, ...]
    cases: int

    @property
    def sentence(self) -> str:
        """The message without its ``file:line:``, which the page shows apart."""
        return _LOCATION.sub("", self.message)


@dataclass(eq=False)
class Student:
    id: str
    folder: str  # in DIR
    submitters: list[dict]
    reason: str | None  # why it was not graded
    report: dict | None  # None: not graded
    sources: dict[str, Source] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return "graded" if self.report else "failed"

    @property
    def href(self) -> str:
        return f"students/{quote(self.id, safe='')}.html"

    @property
    def name(self) -> str:
        return " & ".join(s.get("name") or "?" for s in self.submitters) or self.id

    @property
    def sid(self) -> str:
        return ", ".join(s.get("sid") or "" for s in self.submitters)

    @property
    def items(self) -> list[dict]:
        return self.report["items"] if self.report else []

    def item(self, name: str) -> dict | None:
        return next((i for i in self.items if i["name"] == name), None)

    def assignment_items(self, assignment: str) -> list[dict]:
        return [i for i in self.items if i["assignment"] == assignment]

    def score(self, assignment: str | None = None) -> float | None:
        items = self.items if assignment is None else self.assignment_items(assignment)
        return sum(i["score"] for i in items) if items else None

    @property
    def regrades(self) -> list[dict]:
        return [i for i in self.items if i["regrade"]]

    @cached_property
    def findings(self) -> list[Seen]:
        return collapsed(self.items)

    def marked(self, assignment: str) -> set[int]:
        return {f.line for f in self.findings if f.assignment == assignment and f.line}


@dataclass
class Class:
    course: str
    seed: object
    backend: str
    rubric: dict[str, list[dict]]
    students: list[Student]
    ledger: dict[str, dict] = field(default_factory=dict)  # per assignment: its case, the reference's totals

    @property
    def graded(self) -> list[Student]:
        return [s for s in self.students if s.report]

    @property
    def failed(self) -> list[Student]:
        return [s for s in self.students if not s.report]

    @property
    def total_points(self) -> float:
        return sum(i["points"] for items in self.rubric.values() for i in items)

    def points(self, assignment: str) -> float:
        return sum(i["points"] for i in self.rubric[assignment])

    def results(self, name: str) -> list[dict]:
        """The item ``name`` of every graded submission that has it."""
        return [i for s in self.graded if (i := s.item(name))]


def read_class(batch_dir: Path) -> Class:
    """``DIR/class.json`` and every graded submission's report and source; see the module docstring."""
    path = batch_dir / CLASS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries, rubric = data["submissions"], data["rubric"]
    except FileNotFoundError as e:
        raise ClassReportError(
            f"{batch_dir} holds no {CLASS_FILE}: it is not a class `autograder batch` graded"
        ) from e
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ClassReportError(f"{path}: not a graded class ({type(e).__name__}: {e})") from e
    kernels = {name: data.get("kernels", {}).get(name, name) for name in rubric}
    students = [read_student(batch_dir, entry, kernels) for entry in entries]
    graded = {item["assignment"] for s in students for item in s.items}  # a class graded on some assignments
    rubric = {name: items for name, items in rubric.items() if name in graded} or rubric
    ledger = data.get("ledger") if isinstance(data.get("ledger"), dict) else {}
    return Class(data.get("course", ""), data.get("seed"), data.get("backend", ""), rubric, students, ledger)


def read_student(batch_dir: Path, entry: dict, kernels: dict[str, str]) -> Student:
    report, reason = None, entry.get("reason")
    folder = _folder_name(batch_dir, entry.get("folder") or entry["id"])
    if entry.get("status") == "graded":
        try:
            report = read_report(batch_dir / folder / "report.json")
        except (OSError, ValueError) as e:
            reason = f"its report could not be read: {e}"
    student = Student(
        _folder_name(batch_dir, entry["id"]), folder, entry.get("submitters") or [], reason, report
    )
    if report:
        wanted = sorted({i["assignment"] for i in report["items"]})
        folder, problem = source_folder(batch_dir, entry.get("source"))
        student.sources = (
            read_sources(folder, wanted, kernels)
            if folder
            else dict.fromkeys(wanted, Source(problem=problem))
        )
    return student


def _folder_name(batch_dir: Path, name: str) -> str:
    """``name`` when it is a folder's name in DIR, never a path out of it (it names a page too)."""
    if Path(name).name != name or name in ("", ".", ".."):
        raise ClassReportError(f"{batch_dir / CLASS_FILE}: {name!r} is not a submission folder's name")
    return name


def source_folder(batch_dir: Path, source: str | None) -> tuple[Path | None, str | None]:
    """The folder of a submission's files, from class.json's ``source``: relative to DIR (``alice/source``,
    as ``batch`` writes it), or absolute (as older class.json files have it); never a folder outside
    DIR, links resolved, so that a crafted class.json cannot show files of this machine on a page.
    Where there is none, why."""
    if not source or not isinstance(source, str):
        return None, "the source is not available: class.json names no folder for it"
    root = batch_dir.resolve()
    folder = (root / source).resolve()  # an absolute source stays itself
    if not folder.is_relative_to(root):
        return None, f"the source is not available: {source} is outside the class folder"
    if not folder.is_dir():
        return None, f"the submission ({source}) is no longer on disk"
    return folder, None


def read_sources(folder: Path, assignments: list[str], kernels: dict[str, str]) -> dict[str, Source]:
    """Each assignment's file in the submission, found as grading finds it, or why there is none."""
    with discovery.opened(folder, kernels) as found:
        return {a: read_source(found, a) for a in assignments}


def read_source(found: discovery.Submission, assignment: str) -> Source:
    path, problem = found.locate(assignment)
    if path is None:
        return Source(problem=problem)
    text, problem = policy.read_source(path)
    name = next((rel for rel, p in found.files.items() if p == path), path.name)
    return Source(name, tuple(text.splitlines()), None if text else problem)


# ---- findings ----------------------------------------------------------------------------------


def pattern(message: str) -> str:
    """A finding's sentence as students share it: no ``file:line:``, every number ``#`` and the word
    it counts in the singular (``(a has 1 element)`` and ``(a has 10 elements)`` are one finding)."""
    counted = _COUNTED.sub(lambda m: f"#{m[1]}{singular(m[2])}", _LOCATION.sub("", message))
    return _NUMBER.sub("#", counted)


def singular(word: str) -> str:
    """``elements`` -> ``element``, ``classes`` -> ``class``: English enough for what findings count."""
    if word.endswith(("sses", "ches", "shes", "xes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def finding_records(item: dict) -> Iterable[tuple[str, dict]]:
    """``(case, record)`` of every finding in an item's evidence: its cases', its sanitizer runs'."""
    evidence = item.get("evidence") or {}
    for case in evidence.get("cases", ()):
        for record in case.get("findings", ()):
            yield f"{case.get('group')} {case.get('label')}", record
    for run in evidence.get("sanitizer", ()):
        for record in run.get("findings", ()):
            yield run.get("tool", "compute-sanitizer"), record


def collapsed(items: list[dict]) -> list[Seen]:
    """The findings of these items, one per assignment, kind, line and pattern, in order of appearance."""
    found: dict[tuple, tuple[dict, dict, list[str], set[str]]] = {}
    for item in items:
        for case, record in finding_records(item):
            key = (item["assignment"], record["kind"], record.get("line"), pattern(record["message"]))
            _, _, names, cases = found.setdefault(key, (item, record, [], set()))
            if item["name"] not in names:
                names.append(item["name"])
            cases.add(case)
    return [
        Seen(
            assignment=item["assignment"],
            check=FINDING_CHECKS.get(record["kind"], item["check"]),
            kind=record["kind"],
            pattern=key[3],
            message=record["message"],
            line=record.get("line"),
            items=tuple(names),
            cases=len(cases),
        )
        for key, (item, record, names, cases) in found.items()
    ]


@dataclass
class FindingGroup:
    """A finding many students share: same assignment, check, kind and pattern."""

    example: Seen
    students: list[Student]

    @property
    def witness(self) -> tuple[Student, Seen] | None:
        """The first affected student whose file is still there, and their finding."""
        for student in self.students:
            source = student.sources.get(self.example.assignment, Source())
            for seen in student.findings:
                if _group_key(seen) == _group_key(self.example) and seen.line and source.lines:
                    return student, seen
        return None


def _group_key(seen: Seen) -> tuple:
    return seen.assignment, seen.check, seen.kind, seen.pattern


def finding_groups(students: list[Student]) -> list[FindingGroup]:
    """Findings by how many students they affect, most first."""
    groups: dict[tuple, FindingGroup] = {}
    for student in students:
        for seen in student.findings:
            group = groups.setdefault(_group_key(seen), FindingGroup(seen, []))
            if not group.students or group.students[-1] is not student:
                group.students.append(student)
    return sorted(groups.values(), key=lambda g: (-len(g.students), _group_key(g.example)))


def regrade_groups(students: list[Student]) -> list[tuple[dict, str, list[Student]]]:
    """``(item, why, students)``: the items flagged for a TA, by item and the first line of why."""
    groups: dict[tuple[str, str], tuple[dict, str, list[Student]]] = {}
    for student in students:
        for item in student.regrades:
            why = (item["output"].splitlines() or [""])[0]
            groups.setdefault((item["name"], pattern(why)), (item, why, []))[2].append(student)
    return list(groups.values())


# ---- figures -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One histogram of a figure; a ratio panel (``full_at`` set) is on a log axis with its thresholds."""

    title: str
    values: list[float]
    low: float
    high: float
    xlabel: str
    full_at: float | None = None
    zero_at: float | None = None
    flagged: tuple[float, ...] = ()  # scores of items flagged for regrading, stacked apart


def figure(panels: list[Panel], columns: int = 3) -> str:
    """The panels side by side as one SVG, in a ``data:`` URI an ``<img>`` shows with no server."""
    return data_uri(drawn(panels, columns))


def data_uri(fig: Figure) -> str:
    """The figure's SVG, the same bytes each time it is drawn: no date, and the ids of its clip paths
    salted with a constant, not a random salt (so that a page drawn again is the page it was)."""
    from matplotlib import rc_context

    svg = io.BytesIO()
    with rc_context({"svg.hashsalt": "class report"}):
        fig.savefig(svg, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(svg.getvalue()).decode()


def rooflines(c: Class, student: Student) -> dict[str, str]:
    """Per assignment, the roofline of the student's kernel beside the reference's on the case
    ``ledger.roofline_case`` picks (``roofline.py``), where the report has its counts;
    with both as a GPU timed them where one did."""
    drawn_ = {}
    for assignment, entry in c.ledger.items():
        totals = _case_totals(student.assignment_items(assignment), entry.get("case"))
        if totals is None:
            continue
        points = [roofline.point("student", totals)]
        if entry.get("reference"):
            points.append(roofline.point("reference", entry["reference"]))
        timed = _timed(student.assignment_items(assignment), entry.get("timed"))
        case = ", ".join(f"{k}={v}" for k, v in entry["case"].items())
        title = f"{assignment}, {case}"
        title = (
            roofline.timed_title(title, entry["timed"]["case"], bool(entry["timed"].get("scale")))
            if timed
            else title
        )
        drawn_[assignment] = data_uri(roofline.picture(points + timed, "sm_90", title))
    return drawn_


def _timed(items: list[dict], stand_in: dict | None) -> list[roofline.Point]:
    """Both kernels as a GPU timed them, at the intensities counted on the timed case's stand-in
    (``ledger.stand_in``); none where no GPU timed them or either count is missing."""
    record = roofline.timed_case(items, stand_in["for"]) if stand_in else None
    totals = _case_totals(items, stand_in["case"]) if record and stand_in else None
    if totals is None or not stand_in.get("reference"):
        return []
    scale = stand_in.get("scale")
    counted = [
        roofline.point(who, t, scale)
        for who, t in (("student", totals), ("reference", stand_in["reference"]))
    ]
    return roofline.measured(counted, record)


def _case_totals(items: list[dict], case: dict | None) -> dict | None:
    """The counter totals some item's evidence recorded for ``case``; None where none did."""
    for item in items:
        for record in (item.get("evidence") or {}).get("cases") or ():
            if record.get("params") == case and record.get("counters"):
                return record["counters"]
    return None


def drawn(panels: list[Panel], columns: int) -> Figure:
    """The panels on a grid of ``columns``, the cells left over hidden."""
    from matplotlib.figure import Figure

    columns = min(columns, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(4.2 * columns, 2.9 * rows), layout="constrained")
    grid = list(fig.subplots(rows, columns, squeeze=False).flat)
    for axes, panel in zip(grid, panels, strict=False):
        _draw(axes, panel)
    for axes in grid[len(panels) :]:
        axes.set_visible(False)
    return fig


def _draw(axes, panel: Panel) -> None:
    from matplotlib.ticker import MaxNLocator

    edges = _ratio_axis(axes, panel) if panel.full_at is not None else _score_edges(panel)
    if panel.flagged:
        axes.hist(
            [panel.values, panel.flagged],
            bins=edges,
            stacked=True,
            color=[BAR, FLAG],
            edgecolor="white",
            label=["scored", "flagged for regrading"],
        )
    else:
        axes.hist(panel.values, bins=edges, color=BAR, edgecolor="white")
    axes.set_xlim(panel.low, panel.high)
    axes.set_title(panel.title, fontsize=9)
    axes.set_xlabel(panel.xlabel, fontsize=8)
    axes.set_ylabel("submissions", fontsize=8)  # a group's submission is one count
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.tick_params(labelsize=7)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=3)


def _score_edges(panel: Panel) -> list[float]:
    """Half-point bins (fewer on a long scale), the full score in the last."""
    bins = min(20, max(4, math.ceil(panel.high - panel.low) * 2))
    return [panel.low + (panel.high - panel.low) * k / bins for k in range(bins + 1)]


def _ratio_axis(axes, panel: Panel) -> list[float]:
    """A log axis with the reference and the rubric's thresholds drawn; its bins."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    axes.set_xscale("log")
    axes.xaxis.set_major_locator(FixedLocator([t for t in RATIO_TICKS if panel.low <= t <= panel.high]))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}{TIMES}"))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.axvspan(panel.low, panel.full_at, color=FULL, alpha=0.08)
    axes.axvspan(panel.zero_at, panel.high, color=ZERO, alpha=0.08)
    axes.axvline(1.0, color="#777", linestyle=":", linewidth=1, label=f"reference (1{TIMES})")
    axes.axvline(panel.full_at, color=FULL, linestyle="--", label=f"full marks ≤ {panel.full_at:g}{TIMES}")
    axes.axvline(panel.zero_at, color=ZERO, linestyle="--", label=f"no marks ≥ {panel.zero_at:g}{TIMES}")
    return [panel.low * (panel.high / panel.low) ** (k / 24) for k in range(25)]


def score_panel(title: str, values: list[float], points: float) -> Panel:
    return Panel(title, values, 0.0, max(points, 1e-9), "points")


def item_panel(item: dict, results: list[dict]) -> Panel:
    """An item's scores, those flagged for regrading (not graded here, held for a TA) apart."""
    flagged = tuple(i["score"] for i in results if i["regrade"])
    scored = [i["score"] for i in results if not i["regrade"]]
    return replace(score_panel(item["name"], scored, item["points"]), flagged=flagged)


def ratio_panel(item: dict, values: list[float]) -> Panel:
    """An item's ratios on a log axis around the reference and the rubric's thresholds. A ratio
    the axis cannot place is drawn at its edge: 0 (a count where the student's kernel made none,
    a bank conflict say) at the left, infinity (the reference made none) at the right."""
    placed = [v for v in values if 0 < v < math.inf]
    low = min([*placed, item["full_at"], 1.0]) / 1.25
    high = max([*placed, item["zero_at"]]) * 1.25
    drawn_ = [min(max(v, low), high) for v in values if not math.isnan(v)]
    xlabel = f"{item['metric']}: student / reference"
    return Panel(item["name"], drawn_, low, high, xlabel, full_at=item["full_at"], zero_at=item["zero_at"])


def short_name(name: str, assignment: str) -> str:
    """An item's name without its assignment's, where the page already names the assignment."""
    return name.removeprefix(f"{assignment} ") or name


def measured_ratio(item: dict | None) -> float | None:
    ratio = ((item or {}).get("evidence") or {}).get("ratio") or {}
    return ratio.get("ratio")


# ---- pages -------------------------------------------------------------------------------------


def class_context(c: Class) -> dict:
    """Everything the class page shows, figures drawn."""
    graded = c.graded
    totals = [s.score() for s in graded]
    return {
        "c": c,
        "root": "",
        "mean": statistics.mean(totals) if totals else None,
        "median": statistics.median(totals) if totals else None,
        "figures": class_figures(c),
        "item_rows": {a: [item_row(c, item) for item in items] for a, items in c.rubric.items()},
        "ratios": {a: ratio_rows(c, items) for a, items in c.rubric.items()},
        "groups": finding_groups(graded)[:MAX_FINDING_GROUPS],
        "regrades": regrade_groups(graded),
        "regrade_count": sum(len(s.regrades) for s in graded),
        "students": sorted(c.students, key=lambda s: (s.report is not None, s.score() or 0.0, s.name)),
    }


def class_figures(c: Class) -> dict[str, str | None]:
    """``totals`` (and each assignment's), ``items <assignment>``, ``ratios <assignment>`` (None: nothing
    to draw); none when no submission was graded."""
    graded = c.graded
    if not graded:
        return {}
    totals = [score_panel("total", [s.score() for s in graded], c.total_points)]
    figures = {"totals": figure(totals + [score_panel(a, _scores(graded, a), c.points(a)) for a in c.rubric])}
    for assignment, items in c.rubric.items():
        figures[f"items {assignment}"] = figure([item_panel(i, c.results(i["name"])) for i in items])
        panels = [ratio_panel(row["item"], row["ratios"]) for row in ratio_rows(c, items) if row["ratios"]]
        figures[f"ratios {assignment}"] = figure(panels, 2) if panels else None
    return figures


def _scores(students: list[Student], assignment: str) -> list[float]:
    return [score for s in students if (score := s.score(assignment)) is not None]


def ratio_rows(c: Class, items: list[dict]) -> list[dict]:
    """Each ratio item's measured ratios, and how many students have none: flagged (not measured
    here) or not (not awarded: a wrong answer)."""
    rows = []
    for item in items:
        if item.get("full_at") is None:
            continue
        results = c.results(item["name"])
        values = [r for i in results if (r := measured_ratio(i)) is not None]
        unmeasured = [i for i in results if measured_ratio(i) is None]
        flagged = sum(i["regrade"] for i in unmeasured)
        rows.append(
            {
                "item": item,
                "ratios": values,
                "not_measured": flagged,
                "not_awarded": len(unmeasured) - flagged,
            }
        )
    return rows


def item_row(c: Class, item: dict) -> dict:
    """An item's line of the class page: how many earned all, none, and were flagged."""
    results = c.results(item["name"])
    scores = [i["score"] for i in results]
    return {
        "item": item,
        "mean": statistics.mean(scores) if scores else None,
        "full": sum(score >= item["points"] for score in scores),
        "zero": sum(score == 0 for score in scores),
        "regrade": sum(i["regrade"] for i in results),
    }


class _Pages:
    """The templates (``autograder/delivery/templates``), autoescaped, with the inline script's CSP hash."""

    def __init__(self):
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("autograder.delivery", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["two"] = lambda x: NONE if x is None else two_decimals(x)
        self.env.filters["ratio"] = lambda x: NONE if x is None else f"{x:.3g}{TIMES}"
        self.env.filters["short"] = short_name
        self.env.globals |= {"measured_ratio": measured_ratio, "max_source_lines": MAX_SOURCE_LINES}
        script = self.env.get_template("table_sort.js").render()
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        self.env.globals |= {"script": Markup(script), "script_hash": f"sha256-{digest}"}

    def render(self, template: str, **context) -> str:
        return self.env.get_template(template).render(**context)
