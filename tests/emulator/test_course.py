"""The shipped course on the emulator: every reference scores full marks, every starter 0,
and each planted bug (a small edit of a reference) loses the rubric item meant to catch it."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder import cli

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.parent.name for p in (ROOT / "assignments").glob("*/spec.py"))


def run(*args):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_scores_full_marks_and_starter_zero(assignment):
    outcome = run("selfcheck", "--course", ROOT, "--backend", "emulator", "--assignment", assignment)
    assert outcome.exit_code == 0, outcome.output


NAIVE_TRANSPOSE = """
__global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * TILE + threadIdx.x;
    for (int r = blockIdx.y * TILE + threadIdx.y; r < min(rows, (blockIdx.y + 1) * TILE); r += BLOCK_ROWS)
        if (c < cols) out[c * rows + r] = in[r * cols + c];
}
"""

# name: (assignment, text of the reference, replacement, the item that must lose points)
BUGS = {
    "missing guard": ("vector_add", "if (i < n) c[i]", "c[i]", "vector_add bounds (safety)"),
    "load guard against n": ("window_sum", "g < n + 4 ?", "g < n ?", "window_sum correctness (ragged)"),
    "barrier inside the output guard": (
        "window_sum",
        "    __syncthreads();\n\n    if (base + t < n) {",
        "    if (base + t < n) {\n        __syncthreads();",
        "window_sum barriers (safety)",
    ),
    "five global loads per output": (
        "window_sum",
        "sum += tile[t + d];",
        "sum += x[base + t + d];",
        "window_sum traffic (safety)",
    ),
    "no barrier before the slabs are overwritten": (
        "matmul_block_tile",
        "        __syncthreads();                  // everyone is done",
        "        //",
        "matmul_block_tile barriers (safety)",
    ),
    "unmasked slab loads": (
        "matmul_block_tile",
        "q < S * L && k < K && c < ld ? X[k * ld + c] : 0.0f",
        "q < S * L ? X[k * ld + c] : 0.0f",
        "matmul_block_tile correctness (ragged)",
    ),
    "no second barrier": (
        "gemm_tiled",
        "acc += sA[ty][k] * sB[k][tx];\n        __syncthreads();",
        "acc += sA[ty][k] * sB[k][tx];",
        "gemm_tiled barriers (safety)",
    ),
    "unpadded tile": (
        "transpose",
        "tile[TILE][TILE + 1]",
        "tile[TILE][TILE]",
        "transpose bank conflicts (shared wavefronts)",
    ),
    "column-wise stores": ("transpose", None, NAIVE_TRANSPOSE, "transpose coalesced stores (sectors)"),
    "tail elements dropped": (
        "reduction",
        "for (int i = (n / 4) * 4 + first; i < n; i += stride) s += x[i];",
        "",
        "reduction correctness (ragged)",
    ),
    "barrier inside the tree's if": (
        "reduction",
        "if (t < half) partial[t] += partial[t + half];\n        __syncthreads();",
        "if (t < half) { partial[t] += partial[t + half];\n        __syncthreads(); }",
        "reduction barriers (safety)",
    ),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_planted_bug_loses_its_item(bug, tmp_path):
    assignment, old, new, item = BUGS[bug]
    source = (ROOT / "reference" / f"{assignment}.cu").read_text()
    if old is None:
        source = new
    else:
        assert old in source, "the reference changed: update the planted bug"
        source = source.replace(old, new)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / f"{assignment}.cu").write_text(source)
    results = tmp_path / "results.json"
    outcome = run(
        "grade",
        tmp_path / "sub",
        "--course",
        ROOT,
        "--backend",
        "emulator",
        "--results",
        results,
        "--seed",
        7,
    )
    assert outcome.exit_code == 0, outcome.output
    scores = {t["name"]: (t["score"], t["max_score"]) for t in json.loads(results.read_text())["tests"]}
    assert item in scores, sorted(scores)
    score, max_score = scores[item]
    assert score < max_score, f"{item} kept {score} / {max_score} despite: {bug}"
    if "correctness" not in item:  # the item itself caught it, not the gate on a wrong answer
        for group in ("aligned", "ragged"):
            got, full = scores[f"{assignment} correctness ({group})"]
            assert got == full, f"{bug} also broke correctness ({group})"
