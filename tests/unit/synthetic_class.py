"""A graded class folder as ``autograder batch`` writes it, made up in a moment: nothing is compiled or run.

``make_class(root)`` writes ``root/graded/`` (``class.json``, and per submission ``<id>/source/``,
its kernels, as ``batch`` keeps them for the class report to quote, and, graded, the
``report.json`` of ``report.report_data`` and the ``results.json`` of ``build_results``, both of
a made-up ``Grade``). The class is deterministic and has what a class report must show:
scores spread over two assignments, the same bug (an early return before ``__syncthreads()``)
in many students' files at different lines, ratios measured and not, items flagged for
regrading, a printed ``<script>``, a hostile name, a failed submission, a submission whose
folder is gone, a plain folder with no submitters and a group of two.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
from pathlib import Path

from autograder.contract import Finding
from autograder.course.rubric import Item, Limits, Rubric
from autograder.grading import performance
from autograder.grading.evidence import CaseRecord, Evidence, recorded
from autograder.grading.grade import Grade, ItemResult
from autograder.grading.report import report_data
from autograder.grading.results import build_results

COURSE = "GPU kernels (synthetic)"
SCRIPT = "<script>alert(1)</script>"
HOSTILE_NAME = "<img src=x onerror=alert(2)>"
STUDENTS = 40
# students by index: the early return is in window_sum of every 4th from 1 (GONE is the first of them),
# the unguarded store in vector_add of every 5th from 2, no GPU for performance every 6th from 0
FAILED, PRINTS, HOSTILE, GONE, PLAIN, GROUP, BELOW_FLOOR = 39, 5, 11, 1, 17, 23, 7
RAGGED = ({"T": 32, "n": 1}, {"T": 128, "n": 1000})
SAFETY = ({"T": 32, "n": 70}, {"T": 128, "n": 1000}, {"T": 256, "n": 2053})


def _items(assignment: str, *specs: tuple) -> tuple[Item, ...]:
    items = []
    for check, cases, points, *ratio in specs:
        thresholds = dict(zip(("metric", "full_at", "zero_at"), ratio, strict=False))
        visibility = "after_due_date" if check == "performance" else "visible"
        name = f"{assignment} {check} ({cases})"
        items.append(Item(assignment, check, cases, points, name, visibility, **thresholds))
    return tuple(items)


RUBRIC = Rubric(
    path=Path("rubric.yaml"),
    course=COURSE,
    backend="emulator",
    limits=Limits(),
    assignments={
        "vector_add": _items(
            "vector_add",
            ("correctness", "aligned", 4.0),
            ("correctness", "ragged", 4.0),
            ("bounds", "safety", 3.0),
            ("barriers", "safety", 1.0),
            ("performance", "perf", 3.0, "time", 1.3, 3.0),
        ),
        "window_sum": _items(
            "window_sum",
            ("correctness", "aligned", 4.0),
            ("correctness", "ragged", 4.0),
            ("bounds", "safety", 2.0),
            ("barriers", "safety", 2.0),
            ("traffic", "safety", 2.0, "global_load_values", 1.05, 3.0),
            ("performance", "perf", 3.0, "time", 1.8, 4.0),
        ),
    },
)

WINDOW_SUM_GOOD = """\
__global__ void window_sum(const float* x, float* y, int n) {
    __shared__ float tile[BLOCK + 4];
    int t = threadIdx.x, i = blockIdx.x * BLOCK + t;
    tile[t] = i < n + 4 ? x[i] : 0.0f;
    if (t < 4) tile[BLOCK + t] = i + BLOCK < n + 4 ? x[i + BLOCK] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[t] + tile[t + 1] + tile[t + 2] + tile[t + 3] + tile[t + 4];
}
"""
WINDOW_SUM_EARLY_RETURN = """\
__global__ void window_sum(const float* x, float* y, int n) {
    __shared__ float tile[BLOCK + 4];
    int t = threadIdx.x, i = blockIdx.x * BLOCK + t;
    if (i >= n) return;
    tile[t] = x[i];
    if (t < 4) tile[BLOCK + t] = x[i + BLOCK];
    __syncthreads();
    y[i] = tile[t] + tile[t + 1] + tile[t + 2] + tile[t + 3] + tile[t + 4];
}
"""
VECTOR_ADD_GOOD = """\
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
VECTOR_ADD_UNGUARDED = """\
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    c[i] = a[i] + b[i];
}
"""


@dataclasses.dataclass
class _Student:
    """What a made-up student did: which bugs, how fast, where their file is."""

    index: int
    rng: random.Random
    padding: int  # comment lines above the kernel: the same bug lands on other lines
    window_sum_bug: bool
    vector_add_bug: bool
    wrong_aligned: bool
    gpu_missing: bool  # performance not run here: flagged for regrading

    @property
    def id(self) -> str:
        return student_id(self.index)

    def line(self, offset: int) -> int:
        return self.padding + offset


def student_id(index: int) -> str:
    return f"submission_{100 + index}"


def make_class(root: Path, students: int = STUDENTS, seed: int = 7) -> Path:
    """Write the class under ``root``; returns the graded class folder (``DIR``)."""
    rng = random.Random(seed)
    out = root / "graded"
    entries = []
    for index in range(students):
        student = _Student(
            index=index,
            rng=rng,
            padding=rng.randint(0, 6),
            window_sum_bug=index % 4 == 1,
            vector_add_bug=index % 5 == 2,
            wrong_aligned=index % 9 == 3,
            gpu_missing=index % 6 == 0,
        )
        folder = _write_sources(out / student.id / "source", student)
        entries.append(_entry(student, folder.relative_to(out)))
        if index != FAILED:
            _write_graded(out / student.id, student, folder)
    (out / student_id(FAILED)).mkdir(parents=True, exist_ok=True)
    (out / student_id(FAILED) / "grade.log").write_text(
        "ray.exceptions.WorkerCrashedError: the worker died\n"
    )
    shutil.rmtree(out / student_id(GONE) / "source", ignore_errors=True)  # graded, then deleted
    data = {
        "course": COURSE,
        "seed": seed,
        "backend": "emulator",
        "assignments": list(RUBRIC.assignments),
        "rubric": {
            name: [
                {key: getattr(item, key) for key in ("name", "check", "cases", "points", "metric")}
                | {key: getattr(item, key) for key in ("full_at", "zero_at", "visibility")}
                for item in items
            ]
            for name, items in RUBRIC.assignments.items()
        },
        "submissions": entries,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "class.json").write_text(json.dumps(data, indent=1))
    return out


def _entry(student: _Student, folder: Path) -> dict:
    i = student.index
    submitters = [{"name": f"Student {i:02d}", "sid": f"9{i:05d}", "email": f"s{i:02d}@example.edu"}]
    if i == HOSTILE:
        submitters[0]["name"] = HOSTILE_NAME
    elif i == PLAIN:
        submitters = []
    elif i == GROUP:
        submitters.append({"name": "Partner Of 23", "sid": "900999", "email": "p23@example.edu"})
    failed = i == FAILED
    return {
        "id": student.id,
        "submitters": submitters,
        "status": "failed" if failed else "graded",
        "reason": "the grading task failed: WorkerCrashedError" if failed else None,
        "source": folder.as_posix(),
        "folder": student.id,
    }


def _write_sources(folder: Path, student: _Student) -> Path:
    pad = "".join(f"// student {student.index}, note {k}\n" for k in range(student.padding))
    window_sum = WINDOW_SUM_EARLY_RETURN if student.window_sum_bug else WINDOW_SUM_GOOD
    vector_add = VECTOR_ADD_UNGUARDED if student.vector_add_bug else VECTOR_ADD_GOOD
    # some submit src/WindowSum.cu: the report finds it as grading does (autograder.course.discovery)
    name = "src/WindowSum.cu" if student.index % 7 == 4 else "window_sum.cu"
    for path, text in ((folder / name, pad + window_sum), (folder / "vector_add.cu", pad + vector_add)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def _write_graded(out: Path, student: _Student, folder: Path) -> None:
    results = [_result(student, item) for items in RUBRIC.assignments.values() for item in items]
    grade = Grade(tuple(results), backend="emulator", seed=student.rng.getrandbits(63), elapsed_s=3.2)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report_data(grade, folder), indent=1, default=str))
    (out / "results.json").write_text(json.dumps(build_results(grade, RUBRIC), indent=1))


def _buggy(student: _Student, assignment: str) -> bool:
    return student.window_sum_bug if assignment == "window_sum" else student.vector_add_bug


def _findings(student: _Student, assignment: str, params: dict) -> list[Finding]:
    """The early return's findings, on the cases whose size is no multiple of the block (as the emulator)."""
    n, block = params["n"], params["T"]
    last = (n - 1) // block
    if not _buggy(student, assignment) or n % block == 0:
        return []
    if assignment == "window_sum":
        load, barrier, exit_line = student.line(6), student.line(7), student.line(4)
        file = "window_sum.cu"
        return [
            Finding(
                "out_of_bounds_read",
                f"{file}:{load}: thread (0,0,0) of block ({last},0,0) read x[{last * block + block}] "
                f"past its end (x has {n + 4} elements)",
                line=load,
            ),
            Finding(
                "barrier_divergence",
                f"{file}:{barrier}: thread (0,0,0) of block ({last},0,0) waits at the barrier on line "
                f"{barrier} while {block - n % block} threads of its block already exited at line "
                f"{exit_line}; every thread of a block must reach each __syncthreads(): put the guard "
                "around the work, not around the barrier",
                line=barrier,
            ),
        ]
    store, thread = student.line(3), n % block
    return [
        Finding(
            "out_of_bounds_write",
            f"vector_add.cu:{store}: thread ({thread},0,0) of block ({last},0,0) wrote c[{n}] past its "
            f"end (c has {n} elements)",
            line=store,
            others=block - thread - 1,
        )
    ]


def _cases(student: _Student, item: Item) -> tuple[CaseRecord, ...]:
    groups = {"ragged": RAGGED, "safety": SAFETY}.get(item.cases, ({"T": 256, "n": 65536},))
    return tuple(
        CaseRecord(
            group=item.cases,
            index=k,
            label=", ".join(f"{key}={value}" for key, value in params.items()),
            params=params,
            seed=k,
            backend="emulator",
            correct=not (findings := _findings(student, item.assignment, params)),
            error=None,
            grader_fault=False,
            outputs=(),
            inputs_modified=(),
            findings=tuple(map(recorded, findings)),
            elapsed_ms=None,
            wall_s=None,
            counters=None,
            stdout="",
        )
        for k, params in enumerate(groups)
    )


def _result(student: _Student, item: Item) -> ItemResult:
    cases = _cases(student, item) if item.check != "performance" else ()
    gated = item.check != "correctness" and _buggy(student, item.assignment)  # scored on right answers only
    if item.check in ("traffic", "performance"):
        return _ratio_result(student, item, cases, gated)
    wrong = gated or not all(c.correct for c in cases)
    wrong |= item.check == "correctness" and item.cases == "aligned" and student.wrong_aligned
    lines = [f"{sum(c.correct for c in cases)} of {len(cases)} cases correct"]
    lines += [f"- {c.label}: {f.message}" for c in cases for f in c.findings]
    if student.index == PRINTS and item.check == "correctness":
        lines += ["  your kernel printed:", f"    | {SCRIPT} 0", f"    | {SCRIPT} 1"]
    return ItemResult(item, 0.0 if wrong else item.points, "\n".join(lines), Evidence(cases=cases))


def _ratio_result(student: _Student, item: Item, cases: tuple[CaseRecord, ...], gated: bool) -> ItemResult:
    timed = item.metric == "time"
    if timed and student.gpu_missing:
        evidence = performance.not_run(item.metric)
        return ItemResult(item, 0.0, evidence.message, Evidence(ratio=evidence), regrade=True)
    if gated:
        message = "not awarded: the kernel does not compute the right answer on the cases this check runs"
        evidence = performance.PerformanceEvidence(
            item.metric, 0.0, message, None, item.full_at, item.zero_at
        )
        return ItemResult(item, 0.0, message, Evidence(cases=cases, ratio=evidence))
    if timed:
        ratio = math.exp(student.rng.gauss(math.log(item.full_at * 1.1), 0.45))
    else:
        ratio = student.rng.choice([1.0, 1.0, 1.0, 1.02, 1.3, 1.6, 2.2, 3.4])
    below_floor = timed and student.index == BELOW_FLOOR
    if below_floor:
        ratio = 0.31
    fraction = performance.score_fraction(ratio, item.full_at, item.zero_at)
    message = f"{item.metric}: {ratio:.3f}x the reference (full marks at <= {item.full_at:g}x)"
    if below_floor:
        message += "; 1 case ran faster than the device's physical limit allows, held for a TA to review"
    evidence = performance.PerformanceEvidence(
        item.metric, fraction, message, ratio, item.full_at, item.zero_at, below_floor=below_floor
    )
    score = round(item.points * fraction, 4)
    return ItemResult(item, score, message, Evidence(cases=cases, ratio=evidence), regrade=below_floor)
