"""A backend written in the test tree alone grades a submission: the contract is the only seam.

``RecordingBackend`` wraps the emulator, records every launch, and (when told it
``measures_time``) "times" a kernel by the warp instructions the emulator counts. Nothing
in ``autograder/`` knows it exists: grading asks its capabilities, never its name.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autograder.backends.emulator import EmulatorBackend
from autograder.backends.registry import Backends
from autograder.contract import Backend, Capabilities, Launch, Timing
from autograder.course.folder import read_course
from autograder.grading.pipeline import grade_submission

ROOT = Path(__file__).resolve().parents[2]


class RecordingBackend(Backend):
    name = "recording"

    def __init__(self, capabilities: Capabilities):
        self.capabilities = capabilities
        self.inner = EmulatorBackend()
        self.launches: list[Launch] = []
        self.timed: list[dict] = []

    def compile(self, program):
        self.inner.compile(program)

    def launch(self, launch):
        self.launches.append(launch)
        return self.inner.launch(launch)

    def time(self, request):
        first = request.student[0]
        student = self.inner.launch(first).counters.totals["warp_instructions"]
        reference = self.inner.launch(dataclasses.replace(first, program=request.reference))
        self.timed.append(dict(request.case))
        return Timing(
            case=request.case,
            student_ms=student / 1e3,
            reference_ms=reference.counters.totals["warp_instructions"] / 1e3,
            student_spread=0.0,
            reference_spread=0.0,
            repeats=1,
            input_sets=len(request.student),
            device="recording",
        )


@pytest.fixture(scope="module")
def course():
    """The shipped course, its vector_add perf cases small enough for the emulator (none drawn)."""
    course = read_course(ROOT)
    spec = course.specs["vector_add"]
    perf = ({"n": 3000}, {"n": 1000})
    draws = {group: draw for group, draw in spec.draws.items() if group != "perf"}  # no drawn 34M case
    small = dataclasses.replace(spec, cases={**spec.cases, "perf": perf}, draws=draws)
    return dataclasses.replace(course, specs={**course.specs, "vector_add": small})


@pytest.mark.parametrize("measures_time", [True, False])
def test_a_third_backend_grades_with_and_without_timing(course, measures_time):
    recording = RecordingBackend(Capabilities(measures_time=measures_time))
    safety = EmulatorBackend()
    graded = grade_submission(
        ROOT / "reference", course, Backends(recording, safety), seed=3, assignments=["vector_add"]
    )
    assert graded.backend == "recording"
    items = {r.item.check: r for r in graded.items}
    assert all(items[check].passed for check in ("correctness", "bounds", "barriers"))
    performance = items["performance"]
    if measures_time:
        assert {launch.args[-1].value for launch in recording.launches} >= {3000, 1000}  # the perf gate
        assert performance.passed and recording.timed == [{"n": 3000}, {"n": 1000}]
        assert performance.evidence.ratio.cases[0]["device"] == "recording"
    else:
        assert performance.not_run == "needs a GPU" and performance.regrade and not recording.timed
