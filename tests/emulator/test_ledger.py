"""The lecture's ledger (``autograder/grading/ledger.py``, ``Spec.ledger``): the reference kernels count
exactly what the lectures' closed forms say, and ``profile`` shows it beside the student's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.backends.emulator import EmulatorBackend
from autograder.cli import main
from autograder.contract import Timing
from autograder.course.cases import GroupCase, prepare
from autograder.course.spec import evaluate, load_specs
from autograder.grading import ledger
from autograder.grading.performance import minimum_work, score_timings, with_work
from autograder.profile import roofline

ROOT = Path(__file__).resolve().parents[2]
SPECS = load_specs(ROOT)
ALIGNED = [
    (name, index, case)
    for name, spec in sorted(SPECS.items())
    if spec.ledger
    for index, case in enumerate(spec.cases["aligned"])
]


@pytest.mark.parametrize(("name", "index", "case"), ALIGNED, ids=lambda v: str(v))
def test_the_references_count_the_lectures_closed_forms_on_aligned_shapes(name, index, case):
    spec = SPECS[name]
    prepared = prepare(
        spec, (ROOT / f"reference/{name}.cu").read_text(), GroupCase("aligned", index, case, 1), 60
    )
    totals = EmulatorBackend().launch(prepared.launch).counters.totals
    for counter, formula in spec.ledger.items():
        assert totals[counter] == evaluate(formula, case), f"{counter}: {formula}"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_profile_names_its_case_and_shows_the_reference_and_the_lecture_beside_yours(tmp_path):
    slow = (ROOT / "tests/emulator/variants/matmul_naive/slow_swapped_axes.cu").read_text()
    (tmp_path / "matmul_naive.cu").write_text(slow)
    outcome = run("profile", tmp_path, "--assignment", "matmul_naive", "--case", "M=64,N=64,K=64")
    assert outcome.exit_code == 0, outcome.output
    assert "Case M=64, N=64, K=64 (aligned case 1)" in outcome.output  # --case found in the spec
    row = next(line for line in outcome.output.splitlines() if line.startswith("global_load_values"))
    assert row.split()[1:5] == ["524,288", "524,288", "1.00x", "2"]  # yours, the reference's, 2 * M * N * K
    stores = next(line for line in outcome.output.splitlines() if line.startswith("global_store_sectors"))
    assert stores.split()[1:4] == ["2,048", "512", "4.00x"]  # the swapped axes store uncoalesced


def test_profile_runs_several_cases_and_exits_non_zero_on_findings(tmp_path):
    unguarded = (ROOT / "reference/vector_add.cu").read_text().replace("if (i < n)", "if (true)")
    assert unguarded != (ROOT / "reference/vector_add.cu").read_text()
    (tmp_path / "vector_add.cu").write_text(unguarded)
    outcome = run(
        "profile", tmp_path, "--assignment", "vector_add", "--case", "n=256", "--case", "n=1000", "--json"
    )
    assert outcome.exit_code == 1
    data = json.loads(outcome.output)
    assert [c["case"] for c in data["cases"]] == [{"n": 256}, {"n": 1000}]
    assert data["cases"][0]["findings"] == [] and data["cases"][1]["findings"]
    ledger = {row["counter"]: row for row in data["cases"][0]["ledger"]}
    assert ledger["global_load_values"]["expected"] == 512 == ledger["global_load_values"]["reference"]


def test_profile_draws_the_roofline_with_both_points(tmp_path):
    picture = tmp_path / "roofline.svg"
    outcome = run(
        "profile",
        ROOT / "reference/matmul_block_tile.cu",
        "--assignment",
        "matmul_block_tile",
        "--plot",
        picture,
    )
    assert outcome.exit_code == 0, outcome.output
    svg = picture.read_text()
    assert svg.startswith("<?xml") and 'id="student"' in svg and 'id="reference"' in svg
    assert "4.14 TB/s" in svg and "67 TFLOP/s" in svg


def timed_item(name: str, student_ms: float, reference_ms: float, wrong: str | None = None) -> dict:
    """A TA report's performance item on ``name``'s perf case, as grading on a GPU writes it."""
    case = dict(SPECS[name].cases["perf"][0])
    timing = Timing(case, student_ms, reference_ms, 0.01, 0.01, 30, 3, "NVIDIA H200", wrong=wrong)
    evidence = score_timings([with_work(timing, minimum_work(SPECS[name], case))], 1.3, 4.0)
    return {"assignment": name, "name": f"{name}: time", "evidence": {"ratio": evidence.to_dict()}}


def test_profile_draws_both_kernels_as_a_gpu_timed_them_from_a_ta_report(tmp_path):
    report, picture = tmp_path / "report.json", tmp_path / "roofline.svg"
    report.write_text(json.dumps({"items": [timed_item("matmul_block_tile", 2.0, 1.0)]}))
    source = ROOT / "reference/matmul_block_tile.cu"
    outcome = run(
        "profile", source, "--assignment", "matmul_block_tile", "--plot", picture, "--timings", report
    )
    assert outcome.exit_code == 0, outcome.output
    svg = picture.read_text()
    assert 'id="student-measured"' in svg and 'id="reference-measured"' in svg and 'id="student"' in svg
    assert "TFLOP/s (NVIDIA H200, L=128, V=8, S=8, M=4096" in svg
    assert "counted at L=128, V=8, S=8, M=256, N=256, K=64," in svg and "scaled to the timed case" in svg
    without = tmp_path / "other.json"
    without.write_text(json.dumps({"items": [timed_item("vector_add", 2.0, 1.0)]}))  # another assignment's
    outcome = run(
        "profile", source, "--assignment", "matmul_block_tile", "--plot", picture, "--timings", without
    )
    assert outcome.exit_code == 0 and "no GPU timing of matmul_block_tile" in outcome.output
    assert 'id="student-measured"' not in picture.read_text()
    outcome = run("profile", source, "--assignment", "matmul_block_tile", "--timings", report)
    assert outcome.exit_code == 2 and "give --plot too" in outcome.output
    report.write_text("[]")
    outcome = run(
        "profile", source, "--assignment", "matmul_block_tile", "--plot", picture, "--timings", report
    )
    assert outcome.exit_code == 2 and "is not a TA report" in outcome.output


def test_a_timed_case_is_counted_on_the_aligned_case_with_its_tiles():
    spec = SPECS["matmul_block_tile"]
    timed = dict(spec.cases["perf"][0])
    stand_in = ledger.stand_in(spec, timed)
    assert stand_in == {"L": 128, "V": 8, "S": 8, "M": 256, "N": 256, "K": 64}
    assert ledger.stand_in(spec, {**timed, "L": 96}) is None  # no aligned case has that tile

    def intensity(case, scale=None):
        source = (ROOT / "reference/matmul_block_tile.cu").read_text()
        totals = (
            EmulatorBackend()
            .launch(prepare(spec, source, GroupCase("a", 0, case, 1), 60).launch)
            .counters.totals
        )
        return roofline.point("reference", totals, scale).intensity

    safety = dict(spec.cases["safety"][0])
    assert intensity(stand_in) == 6.4 > intensity(safety) == 4.0  # the tile counts: L=128, not 32
    scale = ledger.timed_scale(spec, stand_in, timed)  # 2MNK, 2MNK/L and MN from 256x256x64 to 4096^3
    assert scale == {"flops": 16384, "global_load_sectors": 16384, "global_store_sectors": 256}
    assert ledger.timed_scale(SPECS["reduction"], {"n": 1}, {"n": 2}) == {}  # no closed forms: counts kept
    # 2MNK flops over 32 bytes x (2MNK/L / 8 load sectors + MN / 2 store sectors) at 4096^3
    at_full_size = 2 * 4096**3 / (32 * (2 * 4096**3 / 128 / 8 + 4096**2 / 2))
    assert intensity(stand_in, scale) == pytest.approx(at_full_size) and at_full_size > 30


def test_a_timed_point_is_the_specs_flops_over_the_measured_time_at_the_counted_intensity():
    items = [
        timed_item("vector_add", 4.0, 2.0),
        timed_item("vector_add", 1.0, 1.0, wrong="launch 2 was wrong"),
    ]
    record = roofline.timed_case(items)
    assert record["student_ms"] == 4.0  # the wrongly timed case is no measurement
    counted = [roofline.Point("student", 100, 1200), roofline.Point("reference", 100, 1200)]
    student, reference = roofline.measured(counted, record)
    n = SPECS["vector_add"].cases["perf"][0]["n"]
    assert (student.label, student.achieved) == ("student-measured", n / 4e-3)
    assert reference.achieved == n / 2e-3 and student.intensity == counted[0].intensity
    assert (
        roofline.timed_case([{"evidence": {"ratio": {"cases": [{"student_ms": 1.0}]}}}]) is None
    )  # no flops


def test_a_points_intensity_is_flops_over_the_sectors_bytes_and_the_roof_caps_it():
    point = roofline.point("student", {"flops": 960, "global_load_sectors": 10, "global_store_sectors": 5})
    assert point.bytes == 480 and point.intensity == 2.0
    assert roofline.attainable(2.0, "sm_90") == 2.0 * 4.14e12
    assert roofline.attainable(1e6, "sm_90") == 67e12


def test_profile_shows_the_lines_that_are_also_the_references_beside_its(tmp_path):
    reference = (ROOT / "reference/matmul_naive.cu").read_text()
    store = "    C[i * N + j] = acc;\n"
    assert store in reference
    (tmp_path / "matmul_naive.cu").write_text(reference.replace(store, store + store))  # the line twice
    outcome = run("profile", tmp_path, "--assignment", "matmul_naive", "--json")
    assert outcome.exit_code == 0, outcome.output
    lines = json.loads(outcome.output)["cases"][0]["lines_beside_the_reference"]
    loop = next(row for row in lines if "acc += A[k * M + i]" in row["source"])
    assert loop["yours"]["global_load_values"] == loop["reference"]["global_load_values"] > 0
    assert not any("C[i * N + j]" in row["source"] for row in lines)  # twice in yours: no longer one line


def test_profile_names_the_students_own_file_in_its_findings(tmp_path):
    """As grading's findings do (``pipeline.submitted_name``): attempt1.cu, not vector_add.cu."""
    (tmp_path / "attempt1.cu").write_text(
        "__global__ void vector_add(const float* a, const float* b, float* c, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    c[i] = a[i] + b[i];\n"
        "}\n"
    )
    outcome = run("profile", tmp_path, "--assignment", "vector_add", "--course", ROOT)
    assert outcome.exit_code == 1, outcome.output  # its findings
    assert "attempt1.cu:3: thread (1,0,0) of block (0,0,0) read a[1] past its end" in outcome.output
    assert "vector_add.cu" not in outcome.output
