"""An item's evidence: what its score rests on, typed, for the modules that read it back and the TA.

``ItemResult.evidence`` is an :class:`Evidence`. The checks write its cases and a performance
item's ratio (``checks.py``), the pipeline marks each case drawn or listed and records a grader
error (``pipeline.py``), ``--sanitize`` adds the sanitizer's runs (``sanitize.py``), and the GPU
service's client what the service did (``delivery/gpu_service.py``); ``results.py`` reads the
ratio for the leaderboard, ``report.py`` the cases for the TA report's tables, ``autograder
grade`` the cases' times.

The TA report's JSON is :meth:`Evidence.to_json`, key for key and in the order it always had:
``autograder class-report`` and ``autograder table`` read those files as plain JSON. The GPU
service answers with that JSON, which :meth:`Evidence.from_json` reads back: the one place a
key of evidence is read by its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any

from autograder.contract import Finding
from autograder.grading.compare import CaseOutcome, OutputComparison, outcome_record, record
from autograder.grading.performance import PerformanceEvidence

Json = dict[str, Any]  # a JSON object as json.loads gives it


@dataclass(frozen=True)
class CaseRecord:
    """One case as the TA report records it (``compare.outcome_record``): bounded, ready for JSON."""

    group: str
    index: int
    label: str
    params: Mapping[str, Any]
    seed: int
    backend: str
    correct: bool
    error: str | None
    grader_fault: bool
    outputs: tuple[OutputComparison, ...]
    inputs_modified: tuple[str, ...]
    findings: tuple[Finding, ...]  # the first ``compare.MAX_RECORDED_FINDINGS``, messages bounded
    elapsed_ms: float | None
    wall_s: float | None  # seconds the launch and its comparison took on the grading machine
    counters: Mapping[str, int] | None  # the launch's counter totals, where its backend counts
    stdout: str  # what the kernel printed, its first ``compare.MAX_REPORTED_STDOUT`` characters
    drawn: bool | None = None  # drawn from the seed, not listed (the pipeline says); None: not said

    @classmethod
    def of(cls, outcome: CaseOutcome) -> CaseRecord:
        return cls.from_json(outcome_record(outcome))

    def to_json(self) -> Json:
        data: Json = {
            "group": self.group,
            "index": self.index,
            "label": self.label,
            "params": self.params,
            "seed": self.seed,
            "backend": self.backend,
            "correct": self.correct,
            "error": self.error,
            "grader_fault": self.grader_fault,
            "outputs": [asdict(o) for o in self.outputs],
            "inputs_modified": list(self.inputs_modified),
            "findings": [asdict(f) for f in self.findings],
            "elapsed_ms": self.elapsed_ms,
            "wall_s": self.wall_s,
            "counters": None if self.counters is None else dict(self.counters),
            "stdout": self.stdout,
        }
        return data if self.drawn is None else {**data, "drawn": self.drawn}

    @classmethod
    def from_json(cls, data: object) -> CaseRecord:
        values = _fields(cls, data)
        return cls(
            **{
                **values,
                "outputs": tuple(_built(OutputComparison, o) for o in _list(values["outputs"])),
                "inputs_modified": tuple(_list(values["inputs_modified"])),
                "findings": tuple(_finding(f) for f in _list(values["findings"])),
            }
        )


@dataclass(frozen=True)
class SanitizerRecord:
    """One compute-sanitizer tool over the item's case group: its findings of the item's check."""

    tool: str
    errors: int | None  # the tool's own count
    note: str | None  # not run, or not finished: why
    findings: tuple[Finding, ...]  # the first ``compare.MAX_RECORDED_FINDINGS``, messages bounded

    def to_json(self) -> Json:
        findings = [asdict(f) for f in self.findings]
        return {"tool": self.tool, "errors": self.errors, "note": self.note, "findings": findings}

    @classmethod
    def from_json(cls, data: object) -> SanitizerRecord:
        values = _fields(cls, data)
        return cls(**{**values, "findings": tuple(_finding(f) for f in _list(values["findings"]))})


@dataclass(frozen=True)
class ServiceRecord:
    """What the GPU service did with an item: graded it (where, on which backend), or why not."""

    url: str | None = None  # the service's scheme, host and port (``gpu_service.public_url``)
    backend: str | None = None
    error: str | None = None

    def to_json(self) -> Json:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: object) -> ServiceRecord:
        return _built(cls, data)


@dataclass(frozen=True)
class Evidence:
    """What an item's score rests on. None (or empty): the item has no such part."""

    cases: tuple[CaseRecord, ...] | None = None  # None: it ran no case (not compiled, not run here)
    ratio: PerformanceEvidence | None = None  # a performance or traffic item's ratio and how it scored
    # For the TA alone, read back by no module: a resources item's figures per case
    # (``resources``), the repr of a grader error that lost the item (``grader_error``).
    detail: Mapping[str, Any] = field(default_factory=dict)
    sanitizer: tuple[SanitizerRecord, ...] | None = None  # --sanitize's runs (bounds and barriers items)
    gpu_service: ServiceRecord | None = None

    def to_json(self) -> Json:
        """The TA report's ``evidence`` of the item."""
        data: Json = {}
        if self.cases is not None:
            data["cases"] = [c.to_json() for c in self.cases]
        if self.ratio is not None:
            data["ratio"] = self.ratio.to_dict()
        data.update(self.detail)
        if self.sanitizer is not None:
            data["sanitizer"] = [run.to_json() for run in self.sanitizer]
        if self.gpu_service is not None:
            data["gpu_service"] = self.gpu_service.to_json()
        return data

    @classmethod
    def from_json(cls, data: object) -> Evidence:
        """What :meth:`to_json` wrote; a ValueError says what does not fit."""
        if not isinstance(data, Mapping):
            raise ValueError("the evidence is not an object")
        typed = ("cases", "ratio", "sanitizer", "gpu_service")
        cases, ratio, sanitizer, service = (data.get(key) for key in typed)
        return cls(
            cases=None if cases is None else tuple(CaseRecord.from_json(c) for c in _list(cases)),
            ratio=None if ratio is None else _performance(ratio),
            detail={k: v for k, v in data.items() if k not in typed},
            sanitizer=None if sanitizer is None else tuple(map(SanitizerRecord.from_json, _list(sanitizer))),
            gpu_service=None if service is None else ServiceRecord.from_json(service),
        )


def recorded(finding: Finding) -> Finding:
    """``finding`` as the TA report records it (``compare.record``: its message bounded)."""
    return _finding(record(finding))


def _performance(data: object) -> PerformanceEvidence:
    values = _fields(PerformanceEvidence, data)
    return PerformanceEvidence(**{**values, "cases": tuple(_list(values.get("cases", ())))})


def _finding(data: object) -> Finding:
    values = _fields(Finding, data)
    dims = {k: tuple(_list(values[k])) for k in ("thread", "block") if values.get(k) is not None}
    return Finding(**{**values, **dims})


def _built(cls: Any, data: object) -> Any:
    return cls(**_fields(cls, data))


def _fields(cls: Any, data: object) -> Json:
    """``data``'s keys as ``cls``'s fields; a ValueError for one it lacks or one ``cls`` has not."""
    name = cls.__name__
    if not isinstance(data, Mapping):
        raise ValueError(f"a {name} is not an object")
    known = {f.name: f for f in fields(cls)}
    unknown = [key for key in data if key not in known]
    if unknown:
        raise ValueError(f"a {name} has no field {unknown[0]!r}")
    missing = [key for key, f in known.items() if key not in data and _required(f)]
    if missing:
        raise ValueError(f"a {name} lacks {missing[0]!r}")
    return dict(data)


def _required(f: Field[Any]) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def _list(value: object) -> list[Any] | tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{type(value).__name__} where a list was expected")
    return value
