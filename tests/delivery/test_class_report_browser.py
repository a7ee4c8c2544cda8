"""The class report as a person looks at it: opened from disk in headless Chromium.

Two classes: the made-up class of tests/unit/synthetic_class.py (40 students), and a tiny real
one, three window_sum kernels graded by ``autograder grade --report`` on the emulator into the
folder ``autograder batch`` writes. Each page must load with nothing in the console (no script
error, no resource that failed to load, nothing the page's Content-Security-Policy blocked),
ask for nothing but itself and its inline figures, show every figure and table, sort its
student table when a header is clicked, and look like something (a non-blank screenshot;
those kept in bench/results/class-report/ come from a run with AUTOGRADER_SCREENSHOTS pointing
there). That the browser check catches what it looks for is shown once on a broken page.
Where Chromium is missing (``.ci/run`` installs Debian's ``chromium`` when it can), the
browser tests skip and say so.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("jinja2", reason="the class report needs the batch extra: pip install -e '.[batch]'")
pytest.importorskip("matplotlib", reason="the class report needs the batch extra: pip install -e '.[batch]'")

from PIL import Image

from autograder.backends.emulator import EmulatorBackend
from autograder.contract import Timing
from autograder.course.folder import read_course
from autograder.course.spec import load_specs
from autograder.delivery.class_report import write_class_report
from autograder.grading.ledger import class_ledger
from autograder.grading.performance import minimum_work, score_timings, with_work
from tests.unit.synthetic_class import PRINTS, SCRIPT, STUDENTS, make_class, student_id

from .chromium import Chromium, Visit, find_chromium

ROOT = Path(__file__).resolve().parents[2]
# where the screenshots go: a scratch folder, or AUTOGRADER_SCREENSHOTS=bench/results/class-report
# to refresh the ones kept in the repository
SHOTS = Path(
    os.environ.get("AUTOGRADER_SCREENSHOTS", Path(tempfile.gettempdir()) / "class-report-screenshots")
)
CHROMIUM = find_chromium()
NO_CHROMIUM = (
    "no chromium on this machine (.ci/run installs Debian's chromium when it runs as root with apt-get; "
    "or: apt-get install chromium): the class report is not opened in a browser here"
)
LOOK = {  # what a person sees once the page has loaded, asked of the page itself
    "figures": "document.querySelectorAll('figure img').length",
    "figures_drawn": "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)",
    "tables": "document.querySelectorAll('table').length",
    "rows": "Array.from(document.querySelectorAll('table')).map(t => t.tBodies[0].rows.length)",
    "scripts": "document.scripts.length",
    "handlers": "document.querySelectorAll('[onerror], [onload], [onclick]').length",
}
SORT_BY_TOTAL = """(() => {
  const table = document.getElementById('student-table');
  const header = table.tHead.rows[0].cells[2];
  header.click();
  header.click();
  return [header.getAttribute('aria-sort'),
          Array.from(table.tBodies[0].rows).map(r => Number(r.cells[2].dataset.sort))];
})()"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    with Chromium(CHROMIUM, tmp_path_factory.mktemp("chromium-profile")) as opened:
        yield opened


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    return write_class_report(make_class(tmp_path_factory.mktemp("synthetic")))


def looked_at(browser: Chromium, page: Path, shot: str, evaluate: dict | None = None) -> Visit:
    """Open ``page``: nothing in the console, nothing fetched, a screenshot that shows something."""
    visit = browser.visit(page.as_uri(), evaluate={**LOOK, **(evaluate or {})})
    assert visit.errors == []
    assert [url[:80] for url in visit.requests if not url.startswith(("file:", "data:"))] == []
    assert visit.values["figures_drawn"] and visit.values["handlers"] == 0
    assert visit.values["scripts"] == 1  # the table sort, allowed by its hash
    image = Image.open(io.BytesIO(visit.screenshot))
    assert image.size == (1280, 2000)
    grey = image.convert("L")
    inked = sum(count for level, count in enumerate(grey.histogram()) if level < 200)
    assert inked > 0.01 * 1280 * 2000, "the screenshot is blank"
    assert len(image.convert("RGB").getcolors(1 << 16) or range(1 << 16)) > 50, "the screenshot is flat"
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / f"{shot}.png").write_bytes(visit.screenshot)
    return visit


def test_the_class_page_of_a_class_of_forty(browser, synthetic):
    visit = looked_at(browser, synthetic, "synthetic-index", {"sorted": SORT_BY_TOTAL})
    assert visit.values["figures"] == 5 and visit.values["tables"] == 5
    assert STUDENTS in visit.values["rows"]
    order, totals = visit.values["sorted"]
    assert order == "descending" and totals == sorted(totals, reverse=True) and totals[-1] == -1


def test_a_student_page_with_findings_and_a_printed_script(browser, synthetic):
    page = synthetic.parent / "students" / f"{student_id(PRINTS)}.html"
    printed = (
        f"Array.from(document.querySelectorAll('pre.output')).some(p => p.textContent.includes({SCRIPT!r}))"
    )
    visit = looked_at(browser, page, "synthetic-student", {"printed": printed})
    assert visit.values["printed"], "what the kernel printed is shown as text"
    assert visit.values["figures"] == 0 and visit.values["tables"] == 2


def test_the_browser_check_catches_a_broken_page(browser, tmp_path, synthetic):
    broken = tmp_path / "broken.html"
    broken.write_text('<!doctype html><img src="missing.png"><script>undefinedFunction();</script>')
    errors = " | ".join(browser.visit(broken.as_uri()).errors)
    assert "undefinedFunction is not defined" in errors and "missing.png" in errors
    injected = tmp_path / "injected.html"  # were a student's <script> ever written unescaped
    injected.write_text(synthetic.read_text().replace("<h1>", f"{SCRIPT}<h1>", 1))
    errors = " | ".join(browser.visit(injected.as_uri()).errors)
    assert "Content Security Policy" in errors


# ---- a tiny real class -------------------------------------------------------------------------

EARLY_RETURN = """\
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    int t = threadIdx.x;
    int i = blockIdx.x * BLOCK + t;
    if (i >= n) return;
    tile[t] = x[i];
    if (t < 4) tile[BLOCK + t] = x[i + BLOCK];
    __syncthreads();
    if (i < 2) printf("<script>alert(1)</script> %d\\n", i);
    y[i] = tile[t] + tile[t + 1] + tile[t + 2] + tile[t + 3] + tile[t + 4];
}
"""
VARIANTS = ROOT / "tests/emulator/variants/window_sum"
REAL = {  # submission folder -> its window_sum kernel (in a file of its own naming)
    "submission_1": ("window_sum.cu", (VARIANTS / "halo_if_t_lt_4.cu").read_text()),
    "submission_2": ("src/WindowSum.cu", EARLY_RETURN),
    "submission_3": ("window_sum.cu", (VARIANTS / "slow_clamped_index.cu").read_text()),
}


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> Path:
    """Three submissions graded as ``autograder batch`` grades each, into its DIR; the class report of it."""
    root = tmp_path_factory.mktemp("real")
    entries = []
    for number, (folder, (name, source)) in enumerate(REAL.items()):
        out = root / "graded" / folder
        submission = out / "source"  # where batch keeps it, for the class report
        (submission / name).parent.mkdir(parents=True)
        (submission / name).write_text(source)
        command = [sys.executable, "-m", "autograder", "grade", str(submission), "--course", str(ROOT)]
        command += ["--assignment", "window_sum", "--backend", "emulator", "--seed", "11"]
        command += ["--results", str(out / "results.json"), "--report", str(out / "report")]
        graded = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert graded.returncode == 0, graded.stderr
        if folder == "submission_2":
            timed_on_a_gpu(out / "report.json", student_ms=4.0, reference_ms=3.0)
        who = [{"name": f"Real Student {number}", "sid": f"7{number}", "email": f"r{number}@example.edu"}]
        entries.append(
            {
                "id": folder,
                "submitters": who,
                "status": "graded",
                "reason": None,
                "source": f"{folder}/source",
            }
            | {"folder": folder}
        )
    rubric = read_course(ROOT).rubric
    data = {
        "course": rubric.course,
        "seed": 11,
        "backend": "emulator",
        "assignments": ["window_sum"],
        "rubric": {
            name: [
                {key: getattr(i, key) for key in ("name", "check", "cases", "points", "metric", "full_at")}
                | {"zero_at": i.zero_at, "visibility": i.visibility}
                for i in items
            ]
            for name, items in rubric.assignments.items()
        },
        "submissions": entries,
        "ledger": class_ledger(read_course(ROOT), ["window_sum"], EmulatorBackend()),  # as batch writes it
    }
    (root / "graded" / "class.json").write_text(json.dumps(data))
    made = subprocess.run(
        [sys.executable, "-m", "autograder", "class-report", str(root / "graded")],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    return root / "graded" / "report" / "index.html"


def timed_on_a_gpu(report: Path, student_ms: float, reference_ms: float) -> None:
    """The report's performance item as grading on a GPU writes it (the emulator times nothing)."""
    data = json.loads(report.read_text())
    spec = load_specs(ROOT)["window_sum"]
    case = dict(spec.cases["perf"][0])
    timing = Timing(case, student_ms, reference_ms, 0.01, 0.01, 30, 3, "NVIDIA H200")
    evidence = score_timings([with_work(timing, minimum_work(spec, case))], 1.2, 4.0)
    item = next(i for i in data["items"] if i["check"] == "performance")
    item["evidence"] = {"ratio": evidence.to_dict()}
    report.write_text(json.dumps(data))


def test_a_real_class_shows_the_early_return_at_its_line(real):
    index = real.read_text()
    assert "1 submission · window_sum · barriers: barrier divergence" in index
    assert "src/WindowSum.cu</code> line 8" in index  # found as grading found it
    assert "vector_add" not in index  # only what was graded
    page = (real.parent / "students" / "submission_2.html").read_text()
    assert '<span class="line hit"><span class="no">8</span>    __syncthreads();</span>' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page


def test_a_real_class_in_the_browser(browser, real):
    visit = looked_at(browser, real, "real-index")
    assert visit.values["figures"] == 3  # totals, items, ratios of window_sum
    student = looked_at(browser, real.parent / "students" / "submission_2.html", "real-student")
    assert student.values["figures"] == 1  # the roofline of window_sum


def test_a_real_students_page_has_the_roofline_of_their_kernel_beside_the_reference(real):
    page = (real.parent / "students" / "submission_2.html").read_text()
    uri = re.search(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="roofline of window_sum', page)
    svg = base64.b64decode(uri.group(1)).decode()
    assert 'id="student"' in svg and 'id="reference"' in svg and "window_sum, T=256, n=1000003" in svg
    assert 'id="student-measured"' in svg and 'id="reference-measured"' in svg  # a GPU timed it
    assert "timed: 0.0671 TFLOP/s (NVIDIA H200, T=256, n=67108864)" in svg  # 4n flops in 4 ms
    assert "intensity counted at T=256, n=65536" in svg
    untimed = (real.parent / "students" / "submission_1.html").read_text()
    uri = re.search(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="roofline of window_sum', untimed)
    assert 'id="student"' in (svg := base64.b64decode(uri.group(1)).decode()) and "measured" not in svg
