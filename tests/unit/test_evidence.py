"""An item's typed evidence (``grading/evidence.py``) writes the TA report's JSON as the untyped
dict did, byte for byte, and reads it back (the GPU service answers with it)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autograder.contract import Counters, Finding
from autograder.grading.compare import (
    MAX_RECORDED_FINDINGS,
    CaseOutcome,
    OutputComparison,
    outcome_record,
    record,
)
from autograder.grading.evidence import CaseRecord, Evidence, SanitizerRecord, ServiceRecord, recorded
from autograder.grading.performance import CounterRatio, not_run, score_counters

LONG = "thread (1,0,0) of block (2,0,0) wrote c[10] past its end " * 20
FINDINGS = (
    Finding(
        "out_of_bounds_write", LONG, line=3, thread=(1, 0, 0), block=(2, 0, 0), array="c", index=10, bound=10
    ),
    Finding("barrier_divergence", "a barrier", line=7, others=31),
    *(Finding("shared_race", f"race {k}", line=k) for k in range(MAX_RECORDED_FINDINGS + 5)),
)
OUTCOMES = (
    CaseOutcome(
        "safety",
        0,
        {"n": 70, "T": 32},
        918273645,
        "emulator",
        outputs=(OutputComparison("c", 70, 3, 1, 0.5, 0.25, "c[7]", 2.5, 2.0, nan=1, infinite=0),),
        inputs_modified=("a",),
        findings=FINDINGS,
        counters=Counters({"lane_instructions": 4200, "global_load_sectors": 18}, {3: {"flops": 1}}),
        stdout="hi\n" * 3000,
        wall_s=0.125,
    ),
    CaseOutcome("ragged", 1, {"n": 1}, 7, "gpu", error="launch failed\nsecond line", grader_fault=True),
    CaseOutcome(
        "perf", 2, {}, 8, "gpu", outputs=(OutputComparison("c", 4, 0, 0, None, None),), elapsed_ms=1.5
    ),
)
RATIO = score_counters("global_load_sectors", [CounterRatio({"n": 70}, 30, 10)], 1.0, 9.0)


def dumped(data) -> str:
    return json.dumps(data, indent=2, default=str)


def old_evidence(outcomes, ratio=None, drawn=None, **more) -> dict:
    """What checks.py, pipeline.py, sanitize.py and gpu_service.py wrote before the evidence was typed."""
    evidence = {"cases": [outcome_record(o) for o in outcomes]}
    if ratio is not None:
        evidence["ratio"] = ratio.to_dict()
    if drawn is not None:
        evidence["cases"] = [{**c, "drawn": d} for c, d in zip(evidence["cases"], drawn, strict=True)]
    return {**evidence, **more}


def test_a_case_record_is_the_outcome_record_key_for_key_and_in_order():
    for o in OUTCOMES:
        written = CaseRecord.of(o).to_json()
        assert dumped(written) == dumped(outcome_record(o)) and list(written) == list(outcome_record(o))
    record = CaseRecord.of(OUTCOMES[0])
    assert len(record.findings) == MAX_RECORDED_FINDINGS and len(record.stdout) < len(OUTCOMES[0].stdout)
    assert record.findings[0].thread == (1, 0, 0) and record.counters == {
        "lane_instructions": 4200,
        "global_load_sectors": 18,
    }


def test_evidence_writes_the_json_the_dict_did():
    drawn = (False, True, False)
    typed = Evidence(
        cases=tuple(replace(CaseRecord.of(o), drawn=d) for o, d in zip(OUTCOMES, drawn, strict=True)),
        ratio=RATIO,
    )
    assert dumped(typed.to_json()) == dumped(old_evidence(OUTCOMES, RATIO, drawn))
    resources = [{"case": {"n": 70}, "registers": 32, "blocks_per_sm": 8, "occupancy": 0.5}]
    typed = Evidence(cases=(CaseRecord.of(OUTCOMES[1]),), detail={"resources": resources})
    assert dumped(typed.to_json()) == dumped(old_evidence(OUTCOMES[1:2], resources=resources))
    sanitizer = [
        {"tool": "memcheck", "errors": 3, "note": None, "findings": [record(f) for f in FINDINGS[:1]]},
        {"tool": "racecheck", "errors": None, "note": "stopped after 300 s", "findings": []},
    ]
    typed = Evidence(
        detail={"grader_error": "ZeroDivisionError()"},
        sanitizer=(
            SanitizerRecord("memcheck", 3, None, tuple(map(recorded, FINDINGS[:1]))),
            SanitizerRecord("racecheck", None, "stopped after 300 s", ()),
        ),
    )
    assert dumped(typed.to_json()) == dumped({"grader_error": "ZeroDivisionError()", "sanitizer": sanitizer})
    waiting = not_run("time")
    typed = Evidence(ratio=waiting, gpu_service=ServiceRecord(error="the GPU service at h:1 refused it"))
    old = {"ratio": waiting.to_dict(), "gpu_service": {"error": "the GPU service at h:1 refused it"}}
    assert dumped(typed.to_json()) == dumped(old)
    graded = ServiceRecord(url="https://gpu.example.edu", backend="gpu").to_json()
    assert graded == {"url": "https://gpu.example.edu", "backend": "gpu"}
    assert Evidence().to_json() == {}


@pytest.mark.parametrize(
    "evidence",
    [
        Evidence(),
        Evidence(cases=()),
        Evidence(cases=tuple(replace(CaseRecord.of(o), drawn=True) for o in OUTCOMES), ratio=RATIO),
        Evidence(cases=tuple(map(CaseRecord.of, OUTCOMES)), detail={"resources": [{"case": {"n": 1}}]}),
        Evidence(
            ratio=not_run("time"),
            sanitizer=(SanitizerRecord("initcheck", 0, None, tuple(map(recorded, FINDINGS))),),
            gpu_service=ServiceRecord(url="http://127.0.0.1:8000", backend="gpu"),
        ),
    ],
)
def test_what_the_report_wrote_reads_back_as_it_was(evidence):
    sent = json.loads(dumped(evidence.to_json()))  # the GPU service's answer carries its report's
    back = Evidence.from_json(sent)
    assert dumped(back.to_json()) == dumped(evidence.to_json())
    assert back.ratio == evidence.ratio and back.gpu_service == evidence.gpu_service
    if evidence.cases:
        assert back.cases[0].findings == CaseRecord.of(OUTCOMES[0]).findings  # Dim3 read back as tuples


@pytest.mark.parametrize(
    "data, problem",
    [
        ([], "the evidence is not an object"),
        ({"cases": {}}, "dict where a list was expected"),
        ({"cases": [{"group": "safety"}]}, "a CaseRecord lacks 'index'"),
        ({"ratio": {**RATIO.to_dict(), "speed": 1}}, "a PerformanceEvidence has no field 'speed'"),
        ({"sanitizer": ["memcheck"]}, "a SanitizerRecord is not an object"),
        ({"gpu_service": {"host": "h"}}, "a ServiceRecord has no field 'host'"),
    ],
)
def test_evidence_of_another_shape_is_a_value_error_naming_what_does_not_fit(data, problem):
    with pytest.raises(ValueError, match=problem):
        Evidence.from_json(data)
