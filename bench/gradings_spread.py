"""How far the references' timed ratios move from one grading to the next on a GPU (issue 27).

Grades the references ``--runs`` times as a batch's GPU task does (``autograder grade reference
--backend gpu --timed-only``), each with a fresh seed, so each draws its own extra cases while
the listed cases are the same in all; or reads the TA reports given instead. Prints, for every
case timed in every grading, the self-ratios (the reference timed against itself: 1 ideally),
their spread ((max - min) / mean: the figure issue 27 holds to 0.2 %), each kernel's launches and
in how many gradings the case was decided (its repeats ended once the ratio lay outside the
range where the item's score changes: ``gpu_timing.stop_reason``, short of the spread's precision);
then each case only some gradings timed (drawn from their seeds: ragged shapes no other grading
times) with its self-ratio, the farthest from 1 first; then every item a grading scored below
full marks. Each grading's wall time is printed as it ends.
Results: ``bench/results/timing-spread.md``.

    python3 bench/gradings_spread.py [--runs 3] [--assignments a,b] [--keep DIR] [REPORT.json ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def grade(report: Path, assignments: list[str]) -> float:
    """One timed-only grading of the references into ``report``.json; its wall seconds."""
    only = [arg for name in assignments for arg in ("--assignment", name)]
    command = [sys.executable, "-m", "autograder", "grade", str(ROOT / "reference"), "--backend", "gpu"]
    command += [
        "--timed-only",
        "--results",
        str(report.with_suffix(".results.json")),
        "--report",
        str(report),
    ]
    started = time.monotonic()
    subprocess.run(command + only, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def timed_cases(report: dict) -> dict[tuple[str, str], dict]:
    """Each timed case's record (``evidence.ratio.cases``), by assignment and case."""
    cases = {}
    for item in report["items"]:
        ratio = (item.get("evidence") or {}).get("ratio") or {}
        for record in ratio.get("cases", ()):
            label = ", ".join(f"{k}={v}" for k, v in record["case"].items())
            cases[(item["assignment"], label)] = record
    return cases


def table(reports: list[dict]) -> list[str]:
    """A row per case timed in every report, the widest spread first."""
    per_report, everywhere = _cases(reports)
    rows = []
    for key in everywhere:
        records = [cases[key] for cases in per_report]
        ratios = [_ratio(r) for r in records]
        spread = (max(ratios) - min(ratios)) / (sum(ratios) / len(ratios))
        launches = [r["repeats"] for r in records]
        decided = sum(bool(r.get("decided")) for r in records)
        rows.append((spread, key, ratios, launches, decided))
    lines = [
        "| assignment | case | self-ratios | spread % | launches | decided |",
        "|---|---|---|---|---|---|",
    ]
    for spread, (assignment, case), ratios, launches, decided in sorted(rows, reverse=True):
        shown = " ".join(f"{r:.4f}" for r in ratios)
        lines.append(
            f"| {assignment} | {case} | {shown} | {100 * spread:.2f} | {min(launches)}-{max(launches)} "
            f"| {decided} of {len(ratios)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reports", nargs="*", type=Path, help="TA reports (.json) to read instead of grading")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--assignments", default="", help="comma-separated; default: every assignment")
    parser.add_argument("--keep", type=Path, default=None, help="keep the gradings' reports in this folder")
    args = parser.parse_args()
    paths = list(args.reports)
    if not paths:
        folder = args.keep or Path(tempfile.mkdtemp(prefix="gradings-spread-"))
        folder.mkdir(parents=True, exist_ok=True)
        assignments = [name for name in args.assignments.split(",") if name]
        for run in range(args.runs):
            path = folder / f"grading-{run}.json"
            print(f"grading {run}: {grade(path, assignments):.1f} s wall", flush=True)
            paths.append(path)
    reports = [json.loads(path.read_text()) for path in paths]
    print("\n".join(table(reports) + drawn(reports) + short_of_full(reports)))


def drawn(reports: list[dict]) -> list[str]:
    """A row per case timed in some gradings but not all (each grading draws its own from its
    seed), the self-ratio farthest from 1 first: the listed cases' spread says nothing of them."""
    per_report, everywhere = _cases(reports)
    rows = [
        (_ratio(record), run, key, record["repeats"], "yes" if record.get("decided") else "no")
        for run, cases in enumerate(per_report)
        for key, record in cases.items()
        if key not in everywhere
    ]
    lines = [
        "",
        "| grading | assignment | drawn case | self-ratio | launches | decided |",
        "|---|---|---|---|---|---|",
    ]
    for ratio, run, (assignment, case), launches, decided in sorted(
        rows, key=lambda row: abs(row[0] - 1), reverse=True
    ):
        lines.append(f"| {run} | {assignment} | {case} | {ratio:.4f} | {launches} | {decided} |")
    return lines if rows else []


def _cases(reports: list[dict]) -> tuple[list[dict], set]:
    """Each report's timed cases, and the cases every report timed (the listed ones)."""
    per_report = [timed_cases(report) for report in reports]
    return per_report, set.intersection(*map(set, per_report)) if per_report else set()


def _ratio(record: dict) -> float:
    return record["student_ms"] / record["reference_ms"]


def short_of_full(reports: list[dict]) -> list[str]:
    """A line for each grading's item below full marks: the references should earn every point,
    and a case a grading lost is missing from the table above (2026-12-03: two assignments' timed
    cases, lost to a page-locking fault, were missing unremarked)."""
    return [
        f"grading {run}: {item['name']} scored {item['score']:g} of {item['max_score']:g}"
        for run, report in enumerate(reports)
        for item in report["items"]
        if item["score"] < item["max_score"]
    ]


if __name__ == "__main__":
    main()
