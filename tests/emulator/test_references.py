"""Every reference kernel of the course, on its aligned, ragged and safety cases: the numpy
answer, and not a single finding (no false positives)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.backends.emulator import EmulatorBackend
from autograder.course.cases import GroupCase, prepare
from autograder.course.spec import load_specs
from autograder.grading.compare import compare_outputs

ROOT = Path(__file__).resolve().parents[2]
COURSE = load_specs(ROOT) if (ROOT / "assignments").is_dir() else {}
CASES = [
    (name, group, index)
    for name, spec in COURSE.items()
    if (ROOT / "reference" / f"{name}.cu").exists()
    for group in ("aligned", "ragged", "safety")
    for index in range(len(spec.cases.get(group, ())))
]


@pytest.mark.parametrize(("name", "group", "index"), CASES)
def test_reference_is_right_and_clean(name, group, index):
    spec = COURSE[name]
    case = spec.cases[group][index]
    source = (ROOT / "reference" / f"{name}.cu").read_text()
    prepared = prepare(spec, source, GroupCase(group, index, case, seed=7 + index), time_limit_s=60)
    result = EmulatorBackend().launch(prepared.launch)
    assert result.findings == [], [f.message for f in result.findings]
    wrong = [o for o in compare_outputs(spec, prepared, result)[0] if o.wrong]
    assert not wrong, wrong
