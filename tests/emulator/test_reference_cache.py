"""The reference's counts kept on the machine (``grading/reference_cache.py``): what the key
names, what is kept, and a grading that takes them scoring as one that runs the reference."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from autograder import cli
from autograder.backends import compile_cache, compiler
from autograder.backends.compiler import compile_ptx
from autograder.backends.emulator import EmulatorBackend
from autograder.backends.registry import Backends
from autograder.contract import Buffer, Capabilities, Counters, Finding, Scalar
from autograder.course.cases import GroupCase, prepare
from autograder.course.folder import read_course
from autograder.course.spec import load_specs
from autograder.grading import pipeline, reference_cache
from autograder.grading.compare import CaseOutcome

ROOT = Path(__file__).resolve().parents[2]
SPECS = load_specs(ROOT)
DATA_DEPENDENT = """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = a[i] + b[i];
    if (a[i] > 1.0f) sum += 0.0f * b[(i + 1) % n];  // a load only where the value says so
    c[i] = sum;
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A machine cache of this test's own, and no compile of this process remembered (a compile
    reaches the cache)."""
    monkeypatch.setenv(compile_cache.VARIABLE, str(tmp_path / "cache"))
    compiler._compile.cache_clear()
    yield
    compiler._compile.cache_clear()


def launch_of(name: str, seed: int = 7, source: str | None = None, group: str = "ragged", index: int = 0):
    spec = SPECS[name]
    text = source if source is not None else (ROOT / "reference" / f"{name}.cu").read_text()
    ref = GroupCase(group, index, spec.cases[group][index], seed)
    return prepare(spec, text, ref, time_limit_s=60)


def compiled(launch):
    compile_ptx(launch.program)  # the machine now keeps its compile
    return launch


def clean(counters: Counters) -> CaseOutcome:
    return CaseOutcome("ragged", 0, {}, 7, "emulator", counters=counters)


def test_the_key_names_the_launch_but_not_its_values(cache):
    prepared = launch_of("vector_add")
    launch = compiled(prepared.launch)
    version = EmulatorBackend.capabilities.counting_version
    key = reference_cache.key(version, launch)
    other_values = launch_of("vector_add", seed=8)
    assert not np.array_equal(other_values.launch.args[0].data, launch.args[0].data)
    assert reference_cache.key(version, other_values.launch) == key

    def shrunk(arg):
        return Buffer(arg.name, arg.data[:-1], arg.is_output) if isinstance(arg, Buffer) else arg

    def as_float64(arg):
        return (
            Buffer(arg.name, arg.data.astype(np.float64), arg.is_output) if isinstance(arg, Buffer) else arg
        )

    def other_scalar(arg):
        return Scalar(arg.name, arg.value + 1, arg.dtype) if isinstance(arg, Scalar) else arg

    changed = [
        dataclasses.replace(launch, grid=(launch.grid[0] + 1, 1, 1)),
        dataclasses.replace(launch, block=(128, 1, 1)),
        dataclasses.replace(launch, shared_bytes=4),
        dataclasses.replace(launch, cooperative=True),
        *(
            dataclasses.replace(launch, args=tuple(map(f, launch.args)))
            for f in (shrunk, as_float64, other_scalar)
        ),
    ]
    keys = {reference_cache.key(version, c) for c in changed} | {reference_cache.key("another", launch)}
    assert len(keys) == len(changed) + 1 and key not in keys


def test_no_key_for_a_program_whose_compile_the_machine_does_not_keep(cache):
    prepared = launch_of("vector_add")
    version = EmulatorBackend.capabilities.counting_version
    assert reference_cache.key(version, prepared.launch) is None
    reference_cache.store(EmulatorBackend(), prepared.launch, clean(Counters({"lane_instructions": 5})))
    assert reference_cache.load(EmulatorBackend(), compiled(prepared.launch)) is None


def test_only_a_clean_run_is_kept_and_only_for_a_backend_that_names_its_counting(cache):
    prepared = launch_of("vector_add")
    launch, backend = compiled(prepared.launch), EmulatorBackend()
    counted = Counters({"lane_instructions": 5, "global_load_bytes": 8})
    wrong = dataclasses.replace(clean(counted), outputs=(_Wrong(),))
    unclean = [
        dataclasses.replace(clean(counted), error="crashed"),
        dataclasses.replace(clean(counted), findings=(Finding("out_of_bounds_read", "read a[9]"),)),
        dataclasses.replace(clean(counted), grader_fault=True),
        wrong,
        clean(Counters()),
    ]
    for outcome in unclean:
        reference_cache.store(backend, launch, outcome)
        assert reference_cache.load(backend, launch) is None, outcome
    reference_cache.store(backend, launch, clean(counted))
    assert reference_cache.load(backend, launch) == Counters(totals=counted.totals)
    unnamed = EmulatorBackend()
    unnamed.capabilities = Capabilities(sees_every_access=True)  # a stand-in's: no counting version
    assert reference_cache.load(unnamed, launch) is None


@dataclasses.dataclass
class _Wrong:
    ok: bool = False


def test_the_references_counts_do_not_depend_on_the_values_drawn():
    """What the key leaves out: every reference counts the same on a case with other values. The
    check itself fails on a kernel whose branches follow its data."""
    for name in SPECS:
        counts = [EmulatorBackend().launch(launch_of(name, seed).launch) for seed in (7, 8)]
        assert counts[0].counters.totals == counts[1].counters.totals, name
    data_dependent = [
        EmulatorBackend()
        .launch(launch_of("vector_add", seed, DATA_DEPENDENT, "aligned").launch)
        .counters.totals
        for seed in (7, 8)
    ]
    assert data_dependent[0] != data_dependent[1]


class Counting(EmulatorBackend):
    """The emulator, in this process, noting each launch's kernel source."""

    def __init__(self):
        super().__init__()
        self.sources: list[str] = []

    def launch(self, launch):
        self.sources.append(launch.program.source)
        return super().launch(launch)


def test_a_grading_that_takes_the_kept_counts_scores_as_one_that_ran_the_reference(cache, tmp_path):
    course = read_course(ROOT)
    submission = tmp_path / "submission"
    submission.mkdir()
    variant = ROOT / "tests/emulator/variants/window_sum/slow_clamped_index.cu"  # loads more: a traffic ratio
    (submission / "window_sum.cu").write_text(variant.read_text())
    reference = (ROOT / "reference" / "window_sum.cu").read_text()
    graded = []
    for _ in range(2):
        backend = Counting()
        grade = pipeline.grade_submission(
            submission, course, Backends(backend, backend), seed=11, assignments=["window_sum"]
        )
        scored = [(r.item.name, r.score, r.output, r.evidence.ratio) for r in grade.items]
        graded.append((scored, backend.sources))
    (first, first_sources), (second, second_sources) = graded
    assert second == first
    assert any(ratio is not None for _, _, _, ratio in first)  # the traffic item divided by the reference's
    assert first_sources.count(reference) > 0 and second_sources.count(reference) == 0
    assert len(second_sources) == len(first_sources) - first_sources.count(reference)


LISTED = ("aligned", "ragged", "safety")  # the groups a grading without a GPU runs on the emulator


def test_a_selfcheck_leaves_the_references_compile_and_every_listed_case_kept(cache):
    """What an image's build leaves for its gradings (the Dockerfile's and Gradescope's
    ``setup.sh``'s last step): after ``selfcheck``, a grading compiles no reference and runs the
    reference on no listed case: each is a key the machine holds."""
    name = "vector_add"
    checked = CliRunner().invoke(
        cli.main, ["selfcheck", "--course", str(ROOT), "--backend", "emulator", "--assignment", name]
    )
    assert checked.exit_code == 0, checked.output
    version = EmulatorBackend.capabilities.counting_version
    for group in LISTED:
        for index in range(len(SPECS[name].cases[group])):
            launch = launch_of(name, group=group, index=index).launch
            kept = reference_cache.key(version, launch)
            assert kept is not None, f"the reference's compile is not kept ({group} {index})"
            assert compile_cache.load(kept) is not None, (
                f"{group} {index}: the reference's counts are not kept"
            )
