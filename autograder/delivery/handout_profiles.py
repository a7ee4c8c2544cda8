"""What ``autograder profile`` shows for the reference kernel, kept in each handout.

Each ``assignments/<name>/README.md`` ends with a block, between the markers below, holding the
part of ``profile``'s output a student compares with: the case, the per-kernel ledger (the
reference's totals and the lecture's closed forms) and the registers and occupancy ptxas gives
the reference. Never its per-line table, which would quote the reference's source lines.
``autograder handout-profiles`` writes the blocks; ``--check`` (and a test) says which are stale.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from autograder.contract import Backend, Counters
from autograder.course.cases import bare_launch
from autograder.course.folder import Course
from autograder.grading.ledger import first_case, ledger, ledger_table, reference_counts
from autograder.grading.resources import describe, launch_resources

BEGIN = "<!-- BEGIN PROFILE: written by `autograder handout-profiles` from the reference; do not edit -->"
END = "<!-- END PROFILE -->"
_BLOCK = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)


def block(course: Course, name: str, emulator: Backend, arch: str = "sm_90") -> str:
    """The README block of assignment ``name``: its reference profiled on the first safety case."""
    spec = course.specs[name]
    group, case = first_case(spec)
    totals = reference_counts(course, spec, case, emulator).totals or {}
    rows = ledger(spec, Counters(totals=totals), totals, case)
    launch = bare_launch(spec, course.reference_source(name).read_text(), case, course.rubric.limits.case_s)
    resources = launch_resources(launch.program, math.prod(launch.block), launch.shared_bytes, arch)
    shown = ", ".join(f"{k}={v}" for k, v in case.items())
    return "\n".join(
        [
            BEGIN,
            f"For the reference solution, `autograder profile . --assignment {name}` ends with this "
            "(a correct kernel of yours shows its own counts in the `yours` column; the lecture's closed "
            "forms hold on aligned shapes):",
            "",
            "```text",
            f"Case {shown} (the first case of the {group} group)",
            "",
            ledger_table(rows, "the reference kernel"),
            "",
            describe(resources),
            "```",
            END,
        ]
    )


def with_block(readme: str, text: str) -> str:
    """``readme`` with its profile block replaced by ``text`` (appended when it has none)."""
    if _BLOCK.search(readme):
        return _BLOCK.sub(lambda _: text, readme)
    return readme.rstrip("\n") + "\n\n" + text + "\n"


def readme_path(course: Course, name: str) -> Path:
    """Assignment ``name``'s handout, whose end holds its block."""
    return course.root / "assignments" / name / "README.md"


def stale(course: Course, names: list[str], emulator: Backend) -> dict[str, str]:
    """The README text of each of ``names`` whose block is not what its reference gives now."""
    found = {}
    for name in names:
        readme = readme_path(course, name).read_text(encoding="utf-8")
        updated = with_block(readme, block(course, name, emulator))
        if updated != readme:
            found[name] = updated
    return found


def write(course: Course, name: str, readme: str) -> Path:
    """Assignment ``name``'s handout rewritten as ``readme`` (``stale``'s text of it); its path."""
    path = readme_path(course, name)
    path.write_text(readme, encoding="utf-8")
    return path
