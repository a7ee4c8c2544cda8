"""The GPU service against local GPU grading, on one GPU machine (issue: performance points on
hosted Gradescope).

With ``autograder serve --backend gpu`` listening at ``--url``, sends every assignment's
reference to it at once (``POST /v1/grade``, one seed), then grades ``reference/`` locally as
``autograder grade reference --backend gpu --seed SEED`` does, and compares item by item: the
score, and for a timed or counted item the ratio student/reference (whose run-to-run spread is
the timing's stability bound, ``docs/performance.md``). Prints one table row per item, the
service's jobs per GPU-hour (the assignments over the wall time of the concurrent batch, which
Ray runs one at a time on the one GPU) and each job's seconds; writes the figures as JSON.
Results: ``bench/results/gpu-service.md``; run on the device by ``bench/device/gpu_service.sh``.

Usage: python3 bench/gpu_service_check.py --url URL --token-file F [--seed 7] [--out DIR]
           [--backend gpu] [--assignments a,b]   (a service on --backend emulator tries the script)
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.course.folder import read_course  # noqa: E402
from autograder.delivery.gpu_service import read_tokens  # noqa: E402


def ask(url: str, token: str, assignment: str, seed: int) -> tuple[dict, float]:
    """The service's answer for ``assignment``'s reference, and the seconds it took."""
    body = {
        "assignment": assignment,
        "source": (ROOT / f"reference/{assignment}.cu").read_text(),
        "seed": seed,
    }
    request = urllib.request.Request(
        url.rstrip("/") + "/v1/grade",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=1200) as answer:
        return json.load(answer), time.monotonic() - started


def local(seed: int, backend: str, names: list[str]) -> dict[str, dict]:
    """``autograder grade reference --backend BACKEND``'s items (report.json), by name."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "autograder", "grade", str(ROOT / "reference"), "--backend", backend]
        command += [
            "--seed",
            str(seed),
            "--results",
            f"{scratch}/results.json",
            "--report",
            f"{scratch}/report",
        ]
        command += [arg for name in names for arg in ("--assignment", name)]
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        return {i["name"]: i for i in json.loads(Path(f"{scratch}/report.json").read_text())["items"]}


def performance(item: dict) -> dict:
    """The item's performance evidence (``evidence.ratio``: metric, ratio, cases), or {}."""
    return (item.get("evidence") or {}).get("ratio") or {}


def ratio(item: dict) -> float | None:
    value = performance(item).get("ratio")
    return value if isinstance(value, int | float) else None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--backend", default="gpu", help="the local grading's (the service's own)")
    parser.add_argument("--assignments", default="", help="comma-separated (default: every one)")
    args = parser.parse_args()
    token = read_tokens(args.token_file)[0].secret
    names = args.assignments.split(",") if args.assignments else list(read_course(ROOT).rubric.assignments)

    started = time.monotonic()
    with ThreadPoolExecutor(len(names)) as pool:
        answers = dict(zip(names, pool.map(lambda n: ask(args.url, token, n, args.seed), names), strict=True))
    wall = time.monotonic() - started
    there = {i["name"]: i for answer, _ in answers.values() for i in answer["items"]}
    here = local(args.seed, args.backend, names)

    rows, worst = [], 0.0
    print("| item | service | local | service ratio | local ratio | difference |")
    print("|---|---|---|---|---|---|")
    for name, mine in here.items():
        theirs = there[name]
        r_there, r_here = ratio(theirs), ratio(mine)
        diff = abs(r_there / r_here - 1) if r_there and r_here else None
        if diff is not None and performance(mine).get("metric") == "time":
            worst = max(worst, diff)
        rows.append(
            {"item": name, "service": theirs["score"], "local": mine["score"], "ratios": [r_there, r_here]}
        )
        shown = [f"{r:.4f}" if r else "" for r in (r_there, r_here)]
        print(
            f"| {name} | {theirs['score']:g} | {mine['score']:g} | {shown[0]} | {shown[1]} | "
            f"{'' if diff is None else f'{100 * diff:.2f} %'} |"
        )
    unequal = [r["item"] for r in rows if r["service"] != r["local"]]
    seconds = {n: round(s, 2) for n, (_, s) in answers.items()}
    print(
        f"\n{len(rows)} items, scores unequal: {unequal or 'none'}; worst timed ratio difference "
        f"{100 * worst:.2f} %"
    )
    print(
        f"{len(names)} jobs at once: {wall:.1f} s wall, {len(names) / wall * 3600:.0f} jobs per GPU-hour; "
        f"each job's seconds from request to answer: {seconds}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    figures = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seed": args.seed,
        "wall_s": wall,
        "job_s": seconds,
        "rows": rows,
        "unequal": unequal,
        "worst_timed_ratio_difference": worst,
    }
    (args.out / "gpu-service-check.json").write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
