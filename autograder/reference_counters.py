"""The reference kernel's counters, recorded: what a student's handout carries instead of its source.

Two things on the emulator need the reference kernel: a traffic item divides the student's
count by the reference's on the same case, and a student's launch may execute at most a
multiple of the reference's own instructions (``pipeline.WORK_MULTIPLE``). Both read only the
reference's counter totals, which depend on the case, not on the input values drawn for it
(tests/delivery/test_handout.py grades with other inputs than those recorded, and gets the
grader's scores). So ``autograder handout`` runs the reference once per case and writes
``reference/<name>.counters.json``; a course without ``reference/<name>.cu`` reads it instead.

The file: ``{"assignment": name, "grader": version, "format": 1, "groups": {group: [{"case":
{param: value}, "totals": {counter: count}}, ...]}}`` in the spec's case order. Only totals:
never the per-line counts, the source, its PTX or its binary.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.backends.base import Counters
from autograder.cases import group_cases
from autograder.compare import CaseOutcome
from autograder.performance import is_timed
from autograder.results import grader_version
from autograder.rubric import Item
from autograder.spec import Spec

FORMAT = 1
BACKEND = "recorded"  # the backend name on outcomes read from the file


def needed_groups(items: Iterable[Item]) -> list[str]:
    """The case groups the emulator runs for ``items``: every item's but a timed performance item's."""
    groups = (item.cases for item in items if not (item.check == "performance" and is_timed(item.metric)))
    return list(dict.fromkeys(groups))


def document(name: str, groups: dict[str, list[CaseOutcome]]) -> dict:
    """The file's content from the reference's outcomes, which must all have completed."""
    for outcome in (o for outcomes in groups.values() for o in outcomes):
        if outcome.error or outcome.counters is None:
            raise ValueError(
                f"{name}: the reference kernel failed on {outcome.group} case {outcome.label()}: "
                f"{outcome.error or 'no counters'}"
            )
    return {
        "assignment": name,
        "grader": grader_version(),
        "format": FORMAT,
        "groups": {
            group: [{"case": o.params, "totals": o.counters.totals} for o in outcomes]
            for group, outcomes in groups.items()
        },
    }


@dataclass(frozen=True)
class Recorded:
    """One assignment's recorded counters, or why they cannot be used."""

    path: Path
    groups: dict
    problem: str | None = None

    def outcomes(self, spec: Spec, group: str, secret: int) -> list[CaseOutcome]:
        """The reference's outcome of each case of ``group`` (counters only); a grader fault if none fits."""
        recorded = self.groups.get(group, [])
        return [self._outcome(ref, recorded) for ref in group_cases(spec, group, secret)]

    def _outcome(self, ref, recorded: list) -> CaseOutcome:
        outcome = CaseOutcome(
            group=ref.group, index=ref.index, params=dict(ref.case), seed=ref.seed, backend=BACKEND
        )
        entry = recorded[ref.index] if ref.index < len(recorded) else None
        problem = self.problem
        if problem is None and (entry is None or entry.get("case") != dict(ref.case)):
            problem = f"{self.path.name} has no counters for {ref.group} case {outcome.label()}"
        if problem:
            return replace(outcome, error=f"grader problem: {problem}", grader_fault=True)
        return replace(outcome, counters=Counters(totals=dict(entry["totals"])))


def load(path: Path) -> Recorded | None:
    """The counters recorded at ``path``; None when there is no such file."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, this grader reads format {FORMAT}")
        return Recorded(path, dict(data["groups"]))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return Recorded(path, {}, f"{path.name} cannot be read ({e})")


def text(content: dict) -> str:
    """The file's text: sorted keys, so that two recordings of the same counts are the same bytes."""
    return json.dumps(content, indent=1, sort_keys=True) + "\n"
