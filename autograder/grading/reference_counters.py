"""The reference kernel's counters, recorded: what a student's handout carries instead of its source.

Two things on the emulator need the reference kernel: a traffic item divides the student's
count by the reference's on the same case, and a student's launch may execute at most a
multiple of the reference's own instructions (``pipeline.WORK_MULTIPLE``). Both read only the
reference's counter totals, which depend on the case, not on the input values drawn for it
(tests/delivery/test_handout.py grades with other inputs than those recorded, and gets the
grader's scores). So ``autograder handout`` runs the reference once per case and writes
``reference/<name>.counters.json``; a course without ``reference/<name>.cu`` reads it instead.

A case group also draws cases from the grading's secret seed (``cases.with_drawn``), whose
sizes no student may know. The handout records each group's drawn cases at a seed of its own,
``draws_seed``, which has bit 63 set: never a seed a grading draws (``grade``, ``batch`` and
``serve`` use 63 bits), so the recorded drawn sizes tell nothing of a grading's. A recorded
group then runs, in the handout, the drawn cases its counters were recorded on (``pipeline``);
grading the course at ``draws_seed`` runs the very same cases (tests/delivery/test_handout.py).

The file: ``{"assignment": name, "grader": version, "format": 2, "draws_seed": seed, "groups":
{group: [{"case": {param: value}, "totals": {counter: count}}, ...]}}``, each group's cases in
the spec's order, its listed ones then those drawn at ``draws_seed``. Only totals: never the
per-line counts, the source, its PTX or its binary.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

from autograder.contract import Counters
from autograder.course.cases import GroupCase, group_cases
from autograder.course.rubric import Item
from autograder.course.spec import Spec
from autograder.grading.compare import CaseOutcome
from autograder.grading.performance import is_timed
from autograder.grading.results import grader_version

FORMAT = 2  # 2: the drawn cases, and the seed they were drawn at
BACKEND = "recorded"  # the backend name on outcomes read from the file
HANDOUT_SEED_BIT = 1 << 63  # set in every draws_seed, never in a grading's secret seed (63 bits)


def is_handout_seed(seed: object) -> bool:
    """Whether ``seed`` can be a handout's ``draws_seed``: 64 bits with bit 63 set, a seed that no
    grading draws (its secret seeds have 63 bits)."""
    return isinstance(seed, int) and not isinstance(seed, bool) and seed >> 63 == 1


def needed_groups(items: Iterable[Item]) -> list[str]:
    """The case groups the emulator runs for ``items``: every item's but a timed performance item's."""
    groups = (item.cases for item in items if not (item.check == "performance" and is_timed(item.metric)))
    return list(dict.fromkeys(groups))


class RecordedCase(TypedDict):
    """One case of a group in the file: its parameters, and the reference's counter totals on it."""

    case: dict[str, int | float]
    totals: dict[str, int]


def document(name: str, groups: dict[str, list[CaseOutcome]], draws_seed: int) -> dict[str, Any]:
    """The file's content from the reference's outcomes, which must all have completed, on the
    cases drawn at ``draws_seed`` (a handout's seed, ``is_handout_seed``)."""
    if not is_handout_seed(draws_seed):
        raise ValueError(f"{name}: {draws_seed} could be a grading's secret seed; a handout draws at its own")
    recorded = {
        group: [RecordedCase(case=o.params, totals=_completed(name, o)) for o in outcomes]
        for group, outcomes in groups.items()
    }
    return {
        "assignment": name,
        "grader": grader_version(),
        "format": FORMAT,
        "draws_seed": draws_seed,
        "groups": recorded,
    }


def _completed(name: str, outcome: CaseOutcome) -> dict[str, int]:
    """The counter totals of a reference's outcome; a ValueError when it did not complete."""
    if outcome.error or outcome.counters is None:
        raise ValueError(
            f"{name}: the reference kernel failed on {outcome.group} case {outcome.label()}: "
            f"{outcome.error or 'no counters'}"
        )
    return outcome.counters.totals


@dataclass(frozen=True)
class Recorded:
    """One assignment's recorded counters, or why they cannot be used."""

    path: Path
    groups: dict[str, list[RecordedCase]]  # as the file has them (``document``), unchecked
    problem: str | None = None
    draws_seed: int | None = None  # the seed the groups' drawn cases were drawn at (never a grading's)

    def outcomes(self, spec: Spec, group: str, secret: int) -> list[CaseOutcome]:
        """The reference's outcome of each case of ``group`` (counters only); a grader fault if none fits."""
        recorded = self.groups.get(group, [])
        return [self._outcome(ref, recorded) for ref in group_cases(spec, group, secret)]

    def _outcome(self, ref: GroupCase, recorded: list[RecordedCase]) -> CaseOutcome:
        outcome = CaseOutcome(
            group=ref.group, index=ref.index, params=dict(ref.case), seed=ref.seed, backend=BACKEND
        )
        entry = recorded[ref.index] if ref.index < len(recorded) else None
        problem = self.problem
        if problem is None and (entry is None or entry.get("case") != dict(ref.case)):
            problem = f"{self.path.name} has no counters for {ref.group} case {outcome.label()}"
        if problem or entry is None:  # no entry: a problem was set just above
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
        if not is_handout_seed(data.get("draws_seed")):
            raise ValueError(f"draws_seed {data.get('draws_seed')!r} is not a handout's seed")
        return Recorded(path, dict(data["groups"]), draws_seed=data["draws_seed"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return Recorded(path, {}, f"{path.name} cannot be read ({e})")


def text(content: dict[str, Any]) -> str:
    """The file's text: sorted keys, so that two recordings of the same counts are the same bytes;
    but a case's parameters in the spec's order, in which the handout names a drawn case (``T=16,
    M=160``), as the course's grader does."""
    return json.dumps(_sorted(content), indent=1) + "\n"


def _sorted(value: object, key: str | None = None) -> object:
    if isinstance(value, dict):
        pairs = value.items() if key == "case" else sorted(value.items())
        return {k: _sorted(v, k) for k, v in pairs}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value
