"""The lecture's ledger (``autograder/ledger.py``, ``Spec.ledger``): the reference kernels count
exactly what the lectures' closed forms say, and ``profile`` shows it beside the student's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder import roofline
from autograder.backends.emulator import EmulatorBackend
from autograder.cases import GroupCase, prepare
from autograder.cli import main
from autograder.spec import evaluate, load_specs

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
