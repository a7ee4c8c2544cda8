"""Correct student kernels written differently from the references get full marks.

Every ``variants/<assignment>/<name>.cu`` is graded through the CLI
(``autograder check <assignment>.cu --backend emulator``), which exits 0 only when every item
that ran got full marks; ``slow_*`` variants are correct but cost more traffic (the handouts
say which items they lose), so only their correctness, bounds and barriers items must be
full. Minimal reproductions of false positives found this way sit above the parametrized tests.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from autograder import cli
from autograder.contract import Buffer, Scalar

from .helpers import launch, out

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = sorted((Path(__file__).parent / "variants").glob("*/*.cu"))

WARP_SIZE = r"""
extern "C" __global__ void warp_size(int* y) {
    y[threadIdx.x] = warpSize + threadIdx.x / warpSize;
}
"""


def test_warp_size_is_the_ptx_constant_warp_sz():
    # warpSize compiles to `mov.u32 %r, WARP_SZ;`, a predefined PTX constant, not a symbol
    result = launch(WARP_SIZE, "warp_size", 1, 64, [out("y", 64, np.int32)])
    assert result.findings == []
    np.testing.assert_array_equal(result.outputs["y"], 32 + np.arange(64) // 32)


SAME_VALUE_FLAG = r"""
extern "C" __global__ void flag(const float* x, int* y, int n) {
    __shared__ int any;
    __shared__ int other;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) { any = 0; other = 0; }
    __syncthreads();
    if (i < n && x[i] > 0.0f) any = 1;       // many threads store the same value: benign
    if (threadIdx.x == 0) other = 1;
    if (threadIdx.x == 33) other = 2;        // a different value than thread 0's: a real race
    __syncthreads();
    y[i] = any + 10 * other;
}
"""


def test_threads_storing_the_same_value_do_not_race_but_different_values_do():
    # racecheck rates a same-value write-after-write as harmless (INFO): the flag idiom
    # `if (cond) flag = 1;` is well defined; the second store of a different value is not
    x = np.ones(64, np.float32)
    result = launch(
        SAME_VALUE_FLAG, "flag", 1, 64, [Buffer("x", x), out("y", 64, np.int32), Scalar("n", np.int32(64))]
    )
    races = [f.message for f in result.findings if f.kind == "shared_race"]
    assert len(races) == 1 and "other[0]" in races[0], races


CONSTANT_WEIGHTS = r"""
__constant__ float weights[4] = {1.0f, 2.0f, 3.0f, 4.0f};
extern "C" __global__ void weigh(const float* x, float* y) {
    int i = threadIdx.x;
    y[i] = weights[0] * x[i] + weights[1] + weights[2] + weights[3];
}
"""


def test_constant_memory_reads_are_no_global_load_traffic():
    # __constant__ tables (a convolution's weights) are read through the constant cache:
    # global_load_values counts the kernel's one load of x per thread, not the four weights
    x = np.arange(32, dtype=np.float32)
    result = launch(CONSTANT_WEIGHTS, "weigh", 1, 32, [Buffer("x", x), out("y", 32)])
    np.testing.assert_allclose(result.outputs["y"], x + 9)
    assert result.counters.totals["global_load_values"] == 32


def _grade(variant: Path, tmp_path: Path) -> Result:
    """``autograder check`` run in this process (the command itself, not a copy of its logic: a
    subprocess per variant would prove nothing more and cost a Python start each)."""
    assignment = variant.parent.name
    kernel = tmp_path / f"{assignment}.cu"  # the file's name says the assignment
    shutil.copyfile(variant, kernel)
    return CliRunner().invoke(
        cli.main, ["check", str(kernel), "--backend", "emulator", "--course", str(ROOT)]
    )


@pytest.mark.parametrize(
    "variant",
    [v for v in VARIANTS if not v.stem.startswith("slow_")],
    ids=lambda v: f"{v.parent.name}/{v.stem}",
)
def test_correct_variant_gets_full_marks(variant, tmp_path):
    graded = _grade(variant, tmp_path)
    assert graded.exit_code == 0, graded.output


@pytest.mark.parametrize(
    "variant", [v for v in VARIANTS if v.stem.startswith("slow_")], ids=lambda v: f"{v.parent.name}/{v.stem}"
)
def test_slow_variant_loses_only_traffic_and_performance(variant, tmp_path):
    graded = _grade(variant, tmp_path)
    items = re.findall(r"^([\d.]+) / ([\d.]+)  (.+)$", graded.stdout, re.MULTILINE)
    safety = [
        (got, worth, name)
        for got, worth, name in items
        if any(check in name for check in ("correctness", "bounds", "barriers"))
    ]
    assert safety, graded.output
    assert all(float(got) == float(worth) for got, worth, _ in safety), graded.stdout
