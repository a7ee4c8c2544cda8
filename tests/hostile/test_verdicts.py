"""A kernel that can never score is told why, on its own file, and costs no TA a regrade: its
timed item scores 0 naming the wrong case (never "a TA regrades it on a GPU"), a NaN output
names the out-of-bounds read of the same launch that made it, and the compile log and the
findings name the file submitted (``attempt1.cu``), not the assignment's ``vector_add.cu``."""

from __future__ import annotations

import json

from .conftest import assert_sound

# vector_add reading the next element without a guard: the last thread's read is past the end,
# and the value it reads reaches that thread's output
UNGUARDED_READ = """__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float after = a[i + 1];  // the next element, read without a guard
    c[i] = a[i] + b[i] + 0.0f * after;
}
"""

MISSING_SEMICOLON = """__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i]
}
"""


def assert_no_regrade(result, tmp_path) -> None:
    """Nothing for a TA: no item tagged, none in the TA report (batch's regrades.csv), no line
    telling the student that points wait for a GPU."""
    assert_sound(result, regrade=True)
    assert not [t["name"] for t in result.results["tests"] if "regrade" in t["tags"]]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert not [i["name"] for i in report["items"] if i["regrade"] or i["not_run"]]
    assert "could not be graded here" not in result.results["output"]


def test_an_unguarded_read_is_named_beside_its_nan_and_the_speed_is_not_measured(graded, tmp_path):
    result = graded({"attempt1.cu": UNGUARDED_READ})
    assert_no_regrade(result, tmp_path)
    ragged = result.item("correctness (ragged)")["output"]
    assert "first c[0]: got nan" in ragged
    assert (
        "the same launch read a[1] past its end on line 4 (bounds item): that read's value is undefined"
        in (ragged)
    )
    assert (
        "attempt1.cu:4: thread (0,0,0) of block (0,0,0) read a[1] past its end"
        in (result.item("bounds (safety)")["output"])
    )
    speed = result.item("performance (perf)")
    assert speed["score"] == 0 and "so its speed is not measured" in speed["output"]
    assert "vector_add.cu" not in json.dumps(result.results["tests"])


def test_a_compile_error_names_the_submitted_file_and_flags_nothing(graded, tmp_path):
    result = graded({"attempt1.cu": MISSING_SEMICOLON})
    assert_no_regrade(result, tmp_path)
    assert result.results["score"] == 0
    assert all('attempt1.cu(4): error: expected a ";"' in t["output"] for t in result.results["tests"])
    assert "vector_add.cu(" not in json.dumps(result.results["tests"])
