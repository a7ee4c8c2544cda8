"""What arrives is not always a clean folder of UTF-8 kernels: each oddity costs only itself."""

import json
import subprocess
import sys

from .conftest import ROOT, assert_sound, reference

BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_costs_nothing(graded):
    result = graded({"vector_add.cu": BOM + reference("vector_add").encode()})
    assert_sound(result)
    assert result.score("vector_add correctness (ragged)") == 4 and result.score("bounds (safety)") == 3


def test_has_include_is_refused_and_costs_only_its_assignment(graded):
    probe = "#if __has_include(</autograder/source/reference/vector_add.cu>)\n#define FOUND 1\n#endif\n"
    result = graded(
        {"vector_add.cu": probe + reference("vector_add"), "window_sum.cu": reference("window_sum")}
    )
    assert_sound(result)
    first = result.item("vector_add correctness (aligned)")
    assert first["score"] == 0 and "vector_add.cu:1: '__has_include' is not allowed" in first["output"]
    assert result.score("window_sum correctness (ragged)") == 4


def test_a_huge_sparse_file_is_refused_without_being_read(graded, tmp_path):
    big = tmp_path / "submission" / "vector_add.cu"
    big.parent.mkdir()
    with big.open("wb") as sparse:
        sparse.truncate(3 << 30)
    result = graded({"window_sum.cu": reference("window_sum")})
    assert_sound(result)
    assert "larger than the limit" in result.item("vector_add correctness (aligned)")["output"]


def test_a_missing_submission_folder_still_yields_results(tmp_path):
    results = tmp_path / "results.json"
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(tmp_path / "nothing-here"),
        "--course",
        str(ROOT),
        "--backend",
        "emulator",
        "--results",
        str(results),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    data = json.loads(results.read_text())
    assert done.returncode == 0 and data["score"] == 0 and len(data["tests"]) > 20
    assert "could not be read" in data["output"] and "nothing-here" not in results.read_text()
    assert not any("regrade" in t["tags"] for t in data["tests"] if "performance" not in t["tags"])


def test_a_compiler_log_flood_stays_small(graded):
    noise = "\n".join(f"int broken_{k} = {'x' * 8000} ;" for k in range(120))
    result = graded({"vector_add.cu": noise + "\n" + reference("vector_add")})
    assert_sound(result)
    first = result.item("vector_add correctness (aligned)")
    assert first["score"] == 0 and "truncated" in first["output"]
    assert all(len(t["output"]) < 1000 for t in result.results["tests"][1:])


def test_a_printf_flood_stays_small(graded):
    flood = reference("vector_add").replace(
        "if (i < n) c[i]", 'printf("%1000000d %s\\n", i, "and then some");\n    if (i < n) c[i]'
    )
    assert "%1000000d" in flood
    result = graded({"vector_add.cu": flood})
    assert_sound(result)
    assert result.score("vector_add correctness (ragged)") == 4  # printing is allowed; it is only bounded
    assert "your kernel printed" in result.item("correctness (aligned)")["output"]
