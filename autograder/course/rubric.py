"""``rubric.yaml``: what every check of every assignment is worth, validated on load.

The file is composed into yaml's node tree (not loaded into plain dicts) so that every
error names the file and the line of the offending node: an unknown key, a missing or
unknown assignment, a non-numeric point value, an unknown check kind, case group or metric.
The format is documented in ``docs/design.md`` (rubric.yaml section).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import yaml

from autograder.contract import BACKEND_NAMES as BACKENDS
from autograder.course.vocabulary import CHECKS, METRICS, RESOURCE_METRICS, SPILLS, VISIBILITIES
from autograder.errors import AutograderError

_TOP_KEYS = ("course", "backend", "limits", "leaderboard", "assignments")
_LIMIT_KEYS = ("compile_s", "case_s", "submission_s", "emulator_mb")
_ASSIGNMENT_KEYS = ("items",)
_ITEM_KEYS = ("check", "cases", "points", "name", "visibility", "metric", "full_at", "zero_at", "at_least")


# every assignment of the course -> the names of its case groups (a spec's ``cases``)
CaseGroups = Mapping[str, Collection[str]]


class RubricError(AutograderError):
    """``rubric.yaml`` is malformed; the message starts with ``file:line:``."""


@dataclass(frozen=True)
class Limits:
    compile_s: float = 60.0
    case_s: float = 20.0  # per launch; caps the spec's own time_limit_s
    submission_s: float = 900.0
    emulator_mb: float = 2048.0  # data cap of the emulator's worker (its compiles and launches)


@dataclass(frozen=True)
class Item:
    """One rubric item: a check of one assignment on one case group, worth ``points``."""

    assignment: str
    check: str
    cases: str  # a case group of the assignment's spec
    points: float
    name: str
    visibility: str = "visible"
    metric: str | None = None  # vocabulary.METRICS: traffic a counter name; performance "time" or one
    full_at: float | None = None  # ratio student/reference at or below which: full points
    zero_at: float | None = None  # ratio at or above which: no points
    at_least: float | None = None  # a resources item on occupancy: the least fraction of warps
    line: int = 0  # where the item is written in rubric.yaml


@dataclass(frozen=True)
class Rubric:
    path: Path
    course: str
    backend: str
    limits: Limits
    assignments: Mapping[str, tuple[Item, ...]] = field(default_factory=dict)
    leaderboard: bool = False  # results.json gets Gradescope's leaderboard: each timed item's ratio

    @property
    def items(self) -> tuple[Item, ...]:
        return tuple(item for items in self.assignments.values() for item in items)


class _Ratio(TypedDict, total=False):
    """An item's fields of a ratio check (traffic, performance) or a resources check."""

    metric: str
    full_at: float
    zero_at: float
    at_least: float


def load_rubric(path: Path, case_groups: CaseGroups | None = None) -> Rubric:
    """Load and validate ``path``.

    ``case_groups`` maps every assignment of the course to its case groups (a spec's
    ``cases``); when given, the rubric must cover exactly those assignments and name only
    their groups.
    """
    path = Path(path)
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RubricError(f"{path}: cannot read: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise RubricError(f"{path}: not valid YAML: {e}") from e
    return _Reader(path).rubric(root, case_groups)


class _Reader:
    """Turns the composed node tree into a :class:`Rubric`, raising at the first bad node."""

    def __init__(self, path: Path):
        self.path = path
        self._scalars = yaml.constructor.SafeConstructor()
        self._names: set[str] = set()  # item names so far, across assignments

    def error(self, node: yaml.Node | None, message: str) -> RubricError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return RubricError(f"{self.path}{line}: {message}")

    def mapping(
        self, node: yaml.Node | None, what: str, keys: tuple[str, ...] | None
    ) -> dict[str, yaml.Node]:
        """The entries of a mapping node; ``keys`` are the allowed keys (None: any)."""
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping")
        entries: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = str(self.scalar(key_node))
            if keys is not None and key not in keys:
                raise self.error(key_node, f"unknown key {key!r} in {what} (allowed: {', '.join(keys)})")
            if key in entries:
                raise self.error(key_node, f"key {key!r} appears twice in {what}")
            entries[key] = value_node
        return entries

    def scalar(self, node: yaml.Node) -> object:
        """The value yaml's safe loader makes of a scalar node (a str, int, float, bool, None, date...)."""
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, "expected a single value here")
        return self._scalars.construct_object(node)

    def number(self, node: yaml.Node, what: str) -> float:
        value = self.scalar(node)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.error(node, f"{what} must be a number, not {node.value!r}")
        return float(value)

    def flag(self, node: yaml.Node, what: str) -> bool:
        value = self.scalar(node) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, bool):
            written = f", not {node.value!r}" if isinstance(node, yaml.ScalarNode) else ""
            raise self.error(node, f"{what} must be true or false{written}")
        return value

    def choice(self, node: yaml.Node, what: str, allowed: tuple[str, ...]) -> str:
        value = self.scalar(node)
        if not isinstance(value, str) or value not in allowed:
            raise self.error(node, f"unknown {what} {node.value!r} (allowed: {', '.join(allowed)})")
        return value

    def rubric(self, root: yaml.Node | None, case_groups: CaseGroups | None) -> Rubric:
        if root is None:
            raise RubricError(f"{self.path}: the file is empty")
        top = self.mapping(root, "the rubric", _TOP_KEYS)
        if "assignments" not in top:
            raise self.error(root, "the rubric has no 'assignments'")
        assignments = self.assignments(top["assignments"], case_groups)
        return Rubric(
            path=self.path,
            course=str(self.scalar(top["course"])) if "course" in top else "",
            backend=self.choice(top["backend"], "backend", BACKENDS) if "backend" in top else "auto",
            limits=self.limits(top["limits"]) if "limits" in top else Limits(),
            assignments=assignments,
            leaderboard=self.flag(top["leaderboard"], "leaderboard") if "leaderboard" in top else False,
        )

    def limits(self, node: yaml.Node) -> Limits:
        entries = self.mapping(node, "limits", _LIMIT_KEYS)
        values = {key: self.number(value, f"limits.{key}") for key, value in entries.items()}
        for key, value in values.items():
            if value <= 0:
                raise self.error(entries[key], f"limits.{key} must be positive")
        return Limits(**values)

    def assignments(self, node: yaml.Node, case_groups: CaseGroups | None) -> dict[str, tuple[Item, ...]]:
        entries = self.mapping(node, "assignments", None)
        if case_groups is not None:
            self.same_assignments(node, entries, case_groups)
        return {
            name: self.assignment(name, value, case_groups[name] if case_groups else None)
            for name, value in entries.items()
        }

    def same_assignments(
        self, node: yaml.MappingNode, entries: Mapping[str, yaml.Node], case_groups: CaseGroups
    ) -> None:
        for key_node, _value in node.value:
            if key_node.value not in case_groups:
                raise self.error(
                    key_node,
                    f"unknown assignment {key_node.value!r}: there is no "
                    f"assignments/{key_node.value}/spec.py (the course has: {', '.join(case_groups)})",
                )
        missing = [name for name in case_groups if name not in entries]
        if missing:
            raise self.error(node, f"no rubric entry for assignment(s) {', '.join(missing)}")

    def assignment(self, name: str, node: yaml.Node, groups: Collection[str] | None) -> tuple[Item, ...]:
        entries = self.mapping(node, f"assignment {name!r}", _ASSIGNMENT_KEYS)
        items_node = entries.get("items")
        if not isinstance(items_node, yaml.SequenceNode) or not items_node.value:
            raise self.error(items_node or node, f"assignment {name!r} needs a non-empty list of items")
        items = tuple(self.item(name, item_node, groups) for item_node in items_node.value)
        self.unique_names(items, items_node)
        return items

    def item(self, assignment: str, node: yaml.Node, groups: Collection[str] | None) -> Item:
        what = f"an item of {assignment!r}"
        entries = self.mapping(node, what, _ITEM_KEYS)
        for key in ("check", "cases", "points"):
            if key not in entries:
                raise self.error(node, f"{what} has no {key!r}")
        check = self.choice(entries["check"], "check kind", CHECKS)
        cases = str(self.scalar(entries["cases"]))
        if groups is not None and cases not in groups:
            raise self.error(
                entries["cases"],
                f"unknown case group {cases!r} for {assignment!r} (the spec has: {', '.join(groups)})",
            )
        points = self.number(entries["points"], "points")
        if points < 0:
            raise self.error(entries["points"], "points must not be negative")
        ratio = self.ratio(check, entries, node, what)
        name = self.scalar(entries["name"]) if "name" in entries else f"{assignment} {check} ({cases})"
        return Item(
            assignment=assignment,
            check=check,
            cases=cases,
            points=points,
            name=str(name),
            visibility=self.choice(entries["visibility"], "visibility", VISIBILITIES)
            if "visibility" in entries
            else "visible",
            line=node.start_mark.line + 1,
            **ratio,
        )

    def ratio(self, check: str, entries: dict[str, yaml.Node], node: yaml.Node, what: str) -> _Ratio:
        if check == "resources":
            return self.resource_rule(entries, node, what)
        if "at_least" in entries:
            raise self.error(entries["at_least"], "'at_least' only applies to resources items")
        keys = ("metric", "full_at", "zero_at")
        if check not in METRICS:
            extra = [key for key in keys if key in entries]
            if extra:
                only = " and ".join(METRICS)
                raise self.error(entries[extra[0]], f"{extra[0]!r} only applies to {only} items")
            return {}
        for key in keys:
            if key not in entries:
                raise self.error(node, f"{what} ({check}) has no {key!r}")
        full_at = self.number(entries["full_at"], "full_at")
        zero_at = self.number(entries["zero_at"], "zero_at")
        if not 0 < full_at < zero_at:
            raise self.error(entries["zero_at"], f"need 0 < full_at < zero_at, got {full_at} and {zero_at}")
        metric = self.choice(entries["metric"], f"{check} metric", METRICS[check])
        return {"metric": metric, "full_at": full_at, "zero_at": zero_at}

    def resource_rule(self, entries: dict[str, yaml.Node], node: yaml.Node, what: str) -> _Ratio:
        """``metric: spills`` (no spills), or ``metric: occupancy`` with ``at_least`` (0 < f <= 1)."""
        extra = [key for key in ("full_at", "zero_at") if key in entries]
        if extra:
            raise self.error(entries[extra[0]], f"{extra[0]!r} does not apply to resources items")
        if "metric" not in entries:
            raise self.error(node, f"{what} (resources) has no 'metric' ({' or '.join(RESOURCE_METRICS)})")
        metric = self.choice(entries["metric"], "resources metric", RESOURCE_METRICS)
        if metric == SPILLS:
            if "at_least" in entries:
                raise self.error(entries["at_least"], "'at_least' applies to the occupancy metric only")
            return {"metric": metric}
        if "at_least" not in entries:
            raise self.error(node, f"{what} (resources, occupancy) has no 'at_least'")
        at_least = self.number(entries["at_least"], "at_least")
        if not 0 < at_least <= 1:
            raise self.error(
                entries["at_least"], f"need 0 < at_least <= 1 (a fraction of warps), got {at_least}"
            )
        return {"metric": metric, "at_least": at_least}

    def unique_names(self, items: tuple[Item, ...], node: yaml.SequenceNode) -> None:
        """Unique across the course: the class table and results.json's readers key items by name."""
        for item, item_node in zip(items, node.value, strict=True):
            if item.name in self._names:
                raise self.error(item_node, f"two items are named {item.name!r}; give one a 'name'")
            self._names.add(item.name)
