import dataclasses
import json
import math

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from autograder.backends.registry import Backends
from autograder.backends.worker import WorkerError
from autograder.contract import (
    Buffer,
    Capabilities,
    CompileError,
    Finding,
    LaunchFailure,
    Timing,
    Unsupported,
)
from autograder.course import cases
from autograder.course.cases import group_cases, prepare, timing_requests
from autograder.course.folder import read_course
from autograder.delivery import gpu_service
from autograder.feedback import scrubbed
from autograder.grading import compare, pipeline, reference_counters, sanitize
from autograder.grading.performance import Scoring
from autograder.grading.report import write_report
from autograder.grading.results import build_results, fallback_results
from autograder.grading.sanitize import SanitizerRun

from .conftest import write
from .fake_backend import FakeBackend

OUT_OF_BOUNDS = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 2 * n)
    if n % ctx.block[0]:
        ctx.finding("out_of_bounds_write", f"vec.cu:3: thread (6,0,0) wrote c[{n}] past its end",
                    line=3, array="c", index=n, bound=n)
"""

LAST_BLOCK_MISSING = """
def vec(ctx, a, b, c, n):
    full = n - n % ctx.block[0]
    c[:full] = a[:full] + b[:full]
    ctx.count("global_load_values", 2 * n)
"""

TWICE_THE_LOADS = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 4 * n)
"""

WRITES_INPUT = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    a[0] = 0
    ctx.count("global_load_values", 2 * n)
"""

COMPILE_ERROR = """
def vec(ctx, a, b, c, n):
#error expected a ';'
"""


def grade(course, backends, folder, seed=1, **kwargs):
    return pipeline.grade_submission(folder, course, backends, seed=seed, **kwargs)


def scores(graded):
    return {r.item.name: r.score for r in graded.items}


def test_reference_scores_full_except_performance_not_run(course, backends):
    graded = grade(course, backends, course.root / "reference")
    assert [r.item.name for r in graded.items][:2] == [
        "vec correctness (aligned)",
        "vec correctness (ragged)",
    ]
    not_full = [r for r in graded.items if not r.passed]
    assert [(r.item.check, r.not_run) for r in not_full] == [("performance", "needs a GPU")]
    assert sum(r.score for r in graded.items) == 10


def test_starter_scores_zero_everywhere(course, backends):
    graded = grade(course, backends, course.root / "starter")
    assert all(r.score == 0 for r in graded.items)
    bounds = next(r for r in graded.items if r.item.check == "bounds")
    assert "not awarded" in bounds.output
    ragged = next(r for r in graded.items if r.item.name == "vec correctness (ragged)")
    assert "70 are NaN (never written, or computed as NaN)" in ragged.output


@pytest.mark.parametrize("timed", [False, True], ids=["emulator", "gpu"])
def test_a_kernel_that_can_never_score_is_not_sent_for_a_gpu_regrade(course, timed, tmp_path):
    """The starter is wrong on the correctness cases: its timed item scores 0 saying so, on the
    emulator as on a GPU (never timed there), and nothing says a TA regrades it."""
    gpu = Timed()
    graded = grade(
        course,
        Backends(gpu, FakeBackend()) if timed else Backends(*[FakeBackend()] * 2),
        course.root / "starter",
    )
    speed = next(r for r in graded.items if r.item.check == "performance")
    assert (speed.score, speed.regrade, speed.not_run) == (0.0, False, None)
    assert not gpu_service.needs_service(speed) and gpu.requests == []
    assert speed.output.startswith(
        "not awarded: your kernel is not correct on aligned case n=64, T=32 and 2 more cases "
        "(see the correctness items), so its speed is not measured"
    )
    results = build_results(graded, course.rubric)
    assert "could not be graded here" not in results["output"]
    assert not any("regrade" in t["tags"] for t in results["tests"])
    json_path, _ = write_report(tmp_path / "report", graded, course.root / "starter")
    assert not any(item["regrade"] for item in json.loads(json_path.read_text())["items"])


def test_out_of_bounds_loses_only_bounds(course, backends, submit):
    graded = grade(course, backends, submit(vec=OUT_OF_BOUNDS))
    assert scores(graded) == {
        "vec correctness (aligned)": 2,
        "vec correctness (ragged)": 2,
        "vec bounds (safety)": 0,
        "vec barriers (safety)": 1,
        "vec traffic (safety)": 1,
        "vec performance (perf)": 0,
    }
    assert "wrote c[70] past its end" in next(r for r in graded.items if r.item.check == "bounds").output


def test_missing_last_block_fails_ragged_and_gates_safety(course, backends, submit):
    graded = grade(course, backends, submit(vec=LAST_BLOCK_MISSING))
    s = scores(graded)
    assert s["vec correctness (aligned)"] == 2 and s["vec correctness (ragged)"] == 0
    assert s["vec bounds (safety)"] == s["vec barriers (safety)"] == s["vec traffic (safety)"] == 0


def test_traffic_ratio(course, backends, submit):
    graded = grade(course, backends, submit(vec=TWICE_THE_LOADS))
    assert scores(graded)["vec traffic (safety)"] == pytest.approx(0.5)


class Canaries(FakeBackend):
    """A grading backend apart from the safety one (a GPU) whose canary zones report a write."""

    def launch(self, launch):
        result = super().launch(launch)
        return dataclasses.replace(result, findings=[*result.findings, CANARY])


CANARY = Finding("out_of_bounds_write", "vec.cu: the canary zone after c was written")


def test_the_grading_backends_own_findings_count_when_it_is_not_the_safety_backend(course, backends):
    apart = Backends(grading=Canaries("gpu", Capabilities()), safety=FakeBackend())
    graded = grade(course, apart, course.root / "reference")
    bounds = next(r for r in graded.items if r.item.check == "bounds")
    assert bounds.score == 0 and "the canary zone after c was written" in bounds.output
    # the safety cases on both backends, and the correctness cases the GPU's canaries saw it on
    assert sorted(case.backend for case in bounds.evidence.cases) == ["emulator"] * 2 + ["gpu"] * 5
    alone = grade(course, backends, course.root / "reference")
    bounds = next(r for r in alone.items if r.item.check == "bounds")
    assert bounds.passed and len(bounds.evidence.cases) == 2  # one backend: its cases once, not twice


def test_modified_input_is_reported(course, backends, submit):
    graded = grade(course, backends, submit(vec=WRITES_INPUT))
    assert "input a was modified" in graded.items[0].output and graded.items[0].score == 0


def test_compile_error_fails_every_item_with_the_line(course, backends, submit):
    graded = grade(course, backends, submit(vec=COMPILE_ERROR))
    assert len(graded.items) == 6 and all(r.score == 0 for r in graded.items)
    assert all("vec.cu(2): error: expected a ';'" in r.output for r in graded.items)
    first, *rest = graded.items
    assert all(r.output.endswith(f"(the whole message is under '{first.item.name}')") for r in rest)


def test_the_compile_error_and_every_launch_name_the_file_the_student_submitted(course, tmp_path):
    """Found as vec's by the kernel it declares, ``attempt1.cu`` is the name NVRTC's log gives;
    its launches and timings carry that name too (the reference keeps its own)."""
    folder = tmp_path / "submission"
    write(folder / "attempt1.cu", "# __global__ void vec(" + COMPILE_ERROR)
    failed = grade(course, Backends(*[FakeBackend()] * 2), folder, assignments=["vec"])
    assert all("attempt1.cu(3): error: expected a ';'" in r.output for r in failed.items)
    assert not any("vec.cu" in r.output or r.regrade or r.not_run for r in failed.items)
    write(folder / "attempt1.cu", "# __global__ void vec(\n" + VEC_SOURCE)
    gpu = Timed()
    graded = grade(course, Backends(gpu, FakeBackend()), folder, assignments=["vec"])
    assert next(r for r in graded.items if r.item.check == "performance").score == 1.0
    student = [*gpu.launched, *(launch for request in gpu.requests for launch in request.student)]
    assert {launch.program.filename for launch in student} == {"attempt1.cu"}
    assert gpu.requests[0].reference.filename == "vec.cu"


def test_a_file_name_nvrtc_or_the_ptx_could_not_carry_compiles_as_the_assignments(course):
    assert pipeline.submitted_name("attempt 2 (copy).CU", "vec") == "attempt 2 (copy).CU"
    odd = ('a"b.cu', "a\\b.cu", "é.cu", "sub/a.cu", ".hidden.cu", "notes.txt")
    assert [pipeline.submitted_name(name, "vec") for name in odd] == ["vec.cu"] * len(odd)


def test_a_long_compiler_log_is_shown_once(course, submit):
    class Verbose(FakeBackend):
        def compile(self, program):
            raise CompileError(
                "\n".join(f"vec.cu({k}): error: this is line {k} of the log" for k in range(2000))
            )

    verbose = Verbose()
    graded = grade(course, Backends(verbose, verbose), submit(vec="def vec(ctx, a, b, c, n):\n    pass\n"))
    first, *rest = [r for r in graded.items if r.item.assignment == "vec"]
    assert first.output.count("\n") > 1000
    assert all(r.output.count("\n") == 0 and "vec.cu(0): error: this is line 0" in r.output for r in rest)


def test_only_submitted_assignments_are_graded(course, backends, submit):
    graded = grade(course, backends, submit(grid2d=(course.root / "reference/grid2d.cu").read_text()))
    assert [r.item.name for r in graded.items] == ["grid2d correctness (aligned)"] and graded.items[0].passed


def test_empty_submission_fails_every_item_with_a_note(course, backends, tmp_path):
    (tmp_path / "empty").mkdir()
    graded = grade(course, backends, tmp_path / "empty")
    assert len(graded.items) == 7 and all(r.score == 0 for r in graded.items)
    assert "expected one of: vec.cu, grid2d.cu" in graded.notes[0]
    assert "vec.cu was not submitted" in graded.items[0].output


def test_multidim_first_wrong_index(course, backends, submit):
    graded = grade(course, backends, submit(grid2d="def grid2d(ctx, x, y, r):\n    y[:-1] = 2 * x[:-1]\n"))
    assert "first y[3, 5]: got nan" in graded.items[0].output


def test_a_grader_bug_in_one_case_is_flagged_and_the_rest_graded(course, submit, monkeypatch):
    class Broken(FakeBackend):
        def launch(self, launch):
            if dict(launch.program.defines)["BLOCK"] == "32" and launch.args[-1].value == 1:
                raise ZeroDivisionError("emulator bug")
            return super().launch(launch)

    broken = Broken()
    graded = grade(course, Backends(broken, broken), course.root / "reference")
    ragged = next(r for r in graded.items if r.item.name == "vec correctness (ragged)")
    assert ragged.regrade and "grader error: ZeroDivisionError: emulator bug" in ragged.output
    assert ragged.score == 1.0  # the other ragged case still counts
    assert next(r for r in graded.items if r.item.check == "bounds").passed


@pytest.mark.parametrize(
    "error",
    [
        LaunchFailure("compile crashed the grading worker (signal SIGKILL)"),
        RuntimeError("nvrtc library missing"),
    ],
)
def test_a_compiler_that_cannot_run_flags_its_items_and_grades_the_rest(course, error):
    class NoCompiler(FakeBackend):
        def compile(self, program):
            if program.kernel == "vec":
                raise error
            super().compile(program)

    broken = NoCompiler()
    graded = grade(course, Backends(broken, broken), course.root / "reference")
    vec = [r for r in graded.items if r.item.assignment == "vec"]
    assert all(r.score == 0 and r.regrade and str(error) in r.output for r in vec)
    assert next(r for r in graded.items if r.item.assignment == "grid2d").passed


def test_unsupported_ptx_fails_the_case_and_flags_the_item(course):
    class Limited(FakeBackend):
        def launch(self, launch):
            raise Unsupported("wmma.load.a.sync is not supported by the emulator (vec.cu:3)")

    limited = Limited()
    graded = grade(course, Backends(limited, limited), course.root / "reference")
    first = graded.items[0]
    assert first.score == 0 and first.regrade and "wmma.load.a.sync is not supported" in first.output


def test_cases_past_the_submission_time_limit_are_not_run(course_root, backends):
    rubric = course_root / "rubric.yaml"
    rubric.write_text(rubric.read_text().replace("submission_s: 300", "submission_s: 0.000001"))
    course = read_course(course_root)
    graded = grade(course, backends, course.root / "reference")
    assert all(r.score == 0 for r in graded.items)
    assert "not run: the submission's time limit was reached" in graded.items[0].output


def test_results_json_shape(course, backends):
    graded = grade(course, backends, course.root / "reference", seed=918273645)
    results = build_results(graded, course.rubric)
    assert results["score"] == 10 and isinstance(results["execution_time"], int)
    assert results["output"] == (  # the after-due-date item's points stay out of the visible sum
        "**1 point could not be graded here (needs a GPU).** A TA regrades it on a GPU; it shows 0 "
        "until then.\n\n10 / 10 points, graded on the emulator backend; not counted here: 1 point shown "
        "after the due date or when grades are published"
    )
    first, perf = results["tests"][0], results["tests"][5]
    assert set(first) == {"name", "score", "max_score", "status", "output", "visibility", "number", "tags"}
    assert (first["number"], first["tags"], first["status"]) == ("1.1", ["vec", "correctness"], "passed")
    assert (perf["visibility"], perf["status"], perf["tags"]) == (
        "after_due_date",
        "failed",
        ["vec", "performance", "regrade"],
    )
    assert results["tests"][6]["number"] == "2.1"
    case_seed = graded.items[0].evidence.cases[0].seed
    assert "seed" not in json.dumps(results) and "918273645" not in json.dumps(results)
    assert str(case_seed) not in json.dumps(results)


def test_fallback_results_list_every_item_at_zero(course):
    results = fallback_results(course.rubric, "RuntimeError: boom", 3.2)
    assert results["score"] == 0 and len(results["tests"]) == 7 and results["execution_time"] == 3
    assert all(t["score"] == 0 and "RuntimeError: boom" in t["output"] for t in results["tests"])
    assert fallback_results(None, "no rubric")["tests"] == []


def test_report_has_seeds_and_evidence(course, backends, submit, tmp_path):
    folder = submit(vec=OUT_OF_BOUNDS)
    graded = grade(course, backends, folder)
    json_path, md_path = write_report(tmp_path / "report.md", graded, folder)
    data = json.loads(json_path.read_text())
    assert data["seed"] == 1 and data["max_score"] == 8
    case = data["items"][2]["evidence"]["cases"][0]
    assert case["seed"] and case["findings"][0]["line"] == 3
    text = md_path.read_text()
    assert "secret seed `1`" in text and "line 3: out_of_bounds_write" in text


def test_sanitize_adds_the_cross_check_of_the_grading_launches_to_bounds_and_barriers(course, monkeypatch):
    native = FakeBackend("native", Capabilities(runs_natively=True))
    seen = []

    def cross_check(launches):
        seen.append([launch.args[-1].value for launch in launches])
        return [SanitizerRun("memcheck", note="stopped after 300 s")]

    monkeypatch.setattr(sanitize, "cross_check", cross_check)
    graded = grade(course, Backends(native, FakeBackend()), course.root / "reference", cross_check=True)
    checked = [r for r in graded.items if "compute-sanitizer cross-check" in r.output]
    assert {r.item.check for r in checked} == {"bounds", "barriers"} and len(seen) == 1  # a group runs once
    assert all(r.passed and r.evidence.sanitizer[0].note == "stopped after 300 s" for r in checked)
    safety = [case.params["n"] for case in checked[0].evidence.cases if case.backend == "emulator"]
    assert seen[0] == safety  # the very cases, in order, that grading ran


def test_sanitize_without_a_native_backend_is_a_note(course, backends):
    graded = grade(course, backends, course.root / "reference", cross_check=True)
    assert graded.notes == (
        "--sanitize was not run: compute-sanitizer needs a GPU, and the emulator backend graded",
    )
    assert not any("cross-check" in r.output for r in graded.items)


def test_students_never_read_a_traceback_or_a_path_of_the_grading_machine(course, submit):
    class Buggy(FakeBackend):
        def launch(self, launch):
            raise WorkerError(
                "the backend raised an unexpected error (a grader bug):\nTraceback (most recent call last):\n"
                '  File "/autograder/source/autograder/emulator/machine.py", line 9, in run\n'
                "    step()\nKeyError: '/opt/venv/lib/python3.12/site-packages/numpy/core.py'\n"
            )

    buggy = Buggy()
    graded = grade(course, Backends(buggy, buggy), course.root / "reference")
    results = json.dumps(build_results(graded, course.rubric))
    assert "Traceback" not in results and "/autograder/" not in results and "/opt/" not in results
    assert "KeyError: 'core.py'" in results and "details are in the TA report" in results
    assert "Traceback" in graded.items[0].output  # the TA report keeps it
    failed = json.dumps(fallback_results(course.rubric, "RubricError: /autograder/source/rubric.yaml:3: bad"))
    assert "rubric.yaml:3: bad" in failed and "/autograder/" not in failed


def test_scrubbing_keeps_what_a_student_wrote():
    kept = "n/2 = 3, x[i/4] a/b/c ./run ../x/y ~/z/w 1/2/3"
    assert scrubbed(kept) == kept
    assert (
        scrubbed("at /tmp/grade-x1/vector_add.cu:5 and /usr/local/cuda/bin/x") == "at vector_add.cu:5 and x"
    )


class Timed(FakeBackend):
    """A grading backend that times (it records what it is asked to launch and to time)."""

    def __init__(self):
        super().__init__("gpu", Capabilities(measures_time=True, runs_natively=True))
        self.launched, self.requests = [], []

    def launch(self, launch):
        self.launched.append(launch)
        return super().launch(launch)

    def time(self, request):
        self.requests.append(request)
        return Timing(request.case, 1.0, 1.0, 0.001, 0.001, 30, len(request.student), "fake")


def _arrays(launch):
    return [(a.name, a.data.dtype, a.data.tobytes()) for a in launch.args if isinstance(a, Buffer)]


def test_cases_drawn_ahead_for_timing_are_those_drawn_in_turn(course, submit):
    """The gating launches and the timing's input sets, drawn in the background, are bit for bit
    what cases.prepare and cases.timing_requests draw for the same seed."""
    timed = Timed()
    graded = grade(course, Backends(grading=timed, safety=FakeBackend()), submit(vec=VEC_SOURCE), seed=5)
    performance = next(r for r in graded.items if r.item.check == "performance")
    assert performance.score == 1.0
    spec, limit = course.specs["vec"], course.rubric.limits.case_s
    sources = {"student": VEC_SOURCE, "reference": (course.root / "reference/vec.cu").read_text()}
    gate = [prepare(spec, VEC_SOURCE, ref, limit).launch for ref in group_cases(spec, "perf", 5)]
    launched = [launch for launch in timed.launched if launch.args[-1].value == 1024]
    assert [_arrays(launch) for launch in launched] == [_arrays(launch) for launch in gate]
    [request] = timed.requests
    [expected] = timing_requests(spec, sources, "perf", 5, limit)
    assert [_arrays(launch) for launch in request.student] == [_arrays(launch) for launch in expected.student]
    assert (request.reference, request.case, request.rtol) == (
        expected.reference,
        expected.case,
        expected.rtol,
    )


class Deciding(Timed):
    """Times n=1024 at 1.0x the reference and n=2048 at ``slower``, each decided where the request
    names a scored range and the ratio lies outside it."""

    def __init__(self, slower):
        super().__init__()
        self.slower = slower

    def time(self, request):
        self.requests.append(request)
        ratio = 1.0 if request.case["n"] == 1024 else self.slower
        low, high = request.scored_between or (-math.inf, math.inf)
        timing = Timing(request.case, ratio, 1.0, 0.01, 0.01, 30, len(request.student), "fake")
        return dataclasses.replace(timing, decided=not low <= ratio <= high)


@pytest.mark.parametrize("slower, again", [(2.0, [1024]), (5.0, [1024, 2048]), (1.1, [])])
def test_a_decided_case_is_timed_again_on_its_inputs_where_the_items_score_needs_its_digits(
    course, slower, again
):
    """A case as fast as the reference is decided (full marks, whatever more launches say), but the
    item's score is the geometric mean of its cases': with a case at 2x (scored) or at 5x (above
    zero_at) beside it, the decided ones are timed again, on the same inputs, to full precision;
    with a case at 1.1x (full marks too) the decided one stands."""
    perf = ({"n": 1024, "T": 32}, {"n": 2048, "T": 32})
    spec = dataclasses.replace(course.specs["vec"], cases={**course.specs["vec"].cases, "perf": perf})
    sources = {"student": VEC_SOURCE, "reference": (course.root / "reference/vec.cu").read_text()}
    timed = Deciding(slower)
    runner = pipeline.CaseRunner(spec, sources, Backends(grading=timed, safety=FakeBackend()), 5, 60, 1e9)
    timings = runner.timings("perf", Scoring((1.2, 4.0), 0.002))
    asked = [(r.case["n"], r.scored_between, r.target_spread) for r in timed.requests]
    assert asked == [(1024, (1.2, 4.0), 0.002), (2048, (1.2, 4.0), 0.002), *((n, None, 0.002) for n in again)]
    assert [t.decided for t in timings] == [not again and slower < 1.2] * 2
    for request in timed.requests[2:]:
        first = next(r for r in timed.requests if r.case == request.case)
        assert list(map(_arrays, request.student)) == list(map(_arrays, first.student))


VEC_SOURCE = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 2 * n)
"""


# instructions counted like the emulator's: the reference 1 M a value, a slow kernel 20 M, a
# kernel slower than the reference but within the budget 7 M
COUNTING_REFERENCE = VEC_LIKE = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 2 * n)
    ctx.count("lane_instructions", {per} * n)
"""


def counting_course(course_root):
    (course_root / "reference/vec.cu").write_text(COUNTING_REFERENCE.format(per=1_000_000))
    return read_course(course_root)


class Limiting(FakeBackend):
    """Ends a launch past its instruction limit as the emulator does: counted up to it, a finding."""

    def launch(self, launch):
        result = super().launch(launch)
        ran = result.counters.totals.get("lane_instructions", 0)
        if launch.instruction_limit is None or ran <= launch.instruction_limit:
            return result
        result.counters.totals["lane_instructions"] = launch.instruction_limit
        stop = Finding(
            "instruction_budget", "vec.cu:3: the kernel did not finish: it ran past the budget", line=3
        )
        return dataclasses.replace(result, findings=[*result.findings, stop])


def test_all_launches_together_stop_at_a_multiple_of_the_references_instructions(course_root, submit):
    course = counting_course(course_root)
    limiting = Limiting()
    backends = Backends(grading=limiting, safety=limiting)
    assert pipeline.TOTAL_MULTIPLE == 8
    graded = grade(course, backends, submit(vec=VEC_LIKE.format(per=20_000_000)))
    s = scores(graded)
    # the budget: 8 times the reference's 238 M over every case the items run. aligned (n=64)
    # and ragged n=1 run whole (1.3 G), ragged n=70 is stopped at the 1.9 G, the safety cases
    # are not run
    assert s["vec correctness (aligned)"] == 2 and s["vec correctness (ragged)"] == 1
    assert s["vec bounds (safety)"] == s["vec traffic (safety)"] == 0
    ragged = next(r for r in graded.items if r.item.name == "vec correctness (ragged)")
    assert (
        "n=70, T=32 [emulator]: stopped: your kernel ran 14.1 times the reference's instructions over "
        "the graded cases; the grader stops at 8 times"
    ) in ragged.output
    bounds = next(r for r in graded.items if r.item.check == "bounds")
    assert (
        "not run: your kernel ran 14.1 times the reference's instructions over the graded cases; "
        "the grader stops at 8 times"
    ) in bounds.output
    ran = sum(c.counters["lane_instructions"] for r in graded.items[:2] for c in r.evidence.cases)
    assert ran == 8 * 238_000_000  # all its work together: the budget, not a launch more
    within = grade(course, backends, submit(vec=VEC_LIKE.format(per=7_000_000)))
    assert sum(r.score for r in within.items) == 7  # every item but the untimed performance one


DRAWING_SPEC = """
from autograder.course.spec import Array, Draw, Scalar, Spec

SPEC = Spec(
    name="vec", kernel="vec",
    args=(Array("a", "n"), Array("b", "n"), Array("c", "n", intent="out"), Scalar("n", "n")),
    block=("T",), grid=("cdiv(n, T)",), defines={"BLOCK": "T"},
    cases={
        "aligned": ({"n": 64, "T": 32},),
        "ragged": ({"n": 1, "T": 32}, {"n": 70, "T": 32}),
        "safety": ({"n": 70, "T": 32}, {"n": 33, "T": 32}),
        "perf": ({"n": 1024, "T": 32},),
    },
    draws={"safety": (Draw({"T": 32}, {"n": (2, 200)}, {"n": "T"}),)},
    reference=lambda a, b, n: {"c": a + b}, time_limit_s=5,
)
"""

# out of bounds on every size but those the spec lists
KNOWS_THE_CASES = """
def vec(ctx, a, b, c, n):
    c[:n] = a[:n] + b[:n]
    ctx.count("global_load_values", 2 * n)
    if n not in (64, 1, 70, 33, 1024):
        ctx.finding("out_of_bounds_write", f"vec.cu:3: thread (6,0,0) wrote c[{n}] past its end",
                    line=3, array="c", index=n, bound=n)
"""


def test_a_kernel_safe_only_on_the_listed_sizes_loses_bounds_on_a_drawn_case(
    course_root, backends, submit, tmp_path
):
    (course_root / "assignments/vec/spec.py").write_text(DRAWING_SPEC)
    course = read_course(course_root)
    folder = submit(vec=KNOWS_THE_CASES)
    graded = grade(course, backends, folder, seed=5)
    bounds = next(r for r in graded.items if r.item.check == "bounds")
    [drawn] = [c for c in bounds.evidence.cases if c.drawn]
    assert bounds.score == 0 and f"(on case safety T=32, n={drawn.params['n']})" in bounds.output
    assert [c.drawn for c in bounds.evidence.cases] == [False, False, True]
    again = next(r for r in grade(course, backends, folder, seed=5).items if r.item.check == "bounds")
    assert [(c.params, c.seed) for c in again.evidence.cases] == [
        (c.params, c.seed) for c in bounds.evidence.cases
    ]  # the same secret draws the same sizes and inputs
    _, md_path = write_report(tmp_path / "report.md", graded, folder)
    assert f"| safety: T=32, n={drawn.params['n']} (drawn) |" in md_path.read_text()
    assert grade(course, backends, course.root / "reference", seed=5).items[2].passed


def test_a_handouts_drawn_cases_are_those_its_counters_were_recorded_on(course, backends, tmp_path):
    spec = dataclasses.replace(
        course.specs["vec"], draws={"ragged": course.specs["vec"].draws.get("ragged", ())}
    )
    drawn = {"n": 45, "T": 32}
    listed = [{"case": dict(case), "totals": {}} for case in spec.cases["safety"]]
    recorded = reference_counters.Recorded(
        tmp_path / "vec.counters.json", {"safety": [*listed, {"case": drawn, "totals": {}}]}
    )
    runner = pipeline.CaseRunner(spec, {"student": "", "reference": None}, backends, 3, 1.0, 1e9, recorded)
    assert runner.spec.drawn["safety"] == (drawn,)
    assert [dict(ref.case) for ref in group_cases(runner.spec, "safety", 3)][-1] == drawn


def test_a_cases_inputs_and_reference_outputs_are_worked_out_once(course, backends, monkeypatch):
    """The reference's kernel runs each case the student's does (the work budget), on the same
    inputs: the student's run takes the inputs and the numpy reference outputs the reference's drew."""
    drawn, references = [], []
    make_inputs, reference_outputs = cases.make_inputs, cases.reference_outputs
    monkeypatch.setattr(
        cases, "make_inputs", lambda spec, case, seed: drawn.append(seed) or make_inputs(spec, case, seed)
    )
    for module in (cases, compare):  # compare imports it by name
        monkeypatch.setattr(
            module, "reference_outputs", lambda *args: references.append(args[1]) or reference_outputs(*args)
        )
    grade(course, backends, course.root / "reference")
    assert drawn and sorted(drawn) == sorted(set(drawn))  # each case's seed drawn from once
    assert len(references) == len(drawn)


class BlasWatching(FakeBackend):
    """Records how many threads numpy's BLAS may use at each launch."""

    def __init__(self, name="emulator", capabilities=None):
        super().__init__(name, capabilities or FakeBackend().capabilities)
        self.blas_threads = []

    def launch(self, launch):
        self.blas_threads.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return super().launch(launch)


def test_a_grading_that_times_nothing_runs_numpy_on_one_blas_thread(course):
    """OpenBLAS's idle threads spin between small references on the emulator worker's cores;
    a GPU grading's big float64 references keep every thread."""
    if not any(i["user_api"] == "blas" for i in threadpool_info()):
        pytest.skip("this numpy's BLAS is not one threadpoolctl controls")
    with threadpool_limits(limits=2, user_api="blas"):  # as on a machine of two cores or more
        emulator = BlasWatching()
        grade(course, Backends(emulator, emulator), course.root / "reference")
        gpu = BlasWatching("gpu", Capabilities(measures_time=True, runs_natively=True))
        grade(course, Backends(gpu, BlasWatching()), course.root / "reference")
    assert emulator.blas_threads and all(threads == {1} for threads in emulator.blas_threads)
    assert gpu.blas_threads and all(threads == {2} for threads in gpu.blas_threads)
