"""Resource requests a GPU refuses are the student's errors, graded as such: a sentence in
CUDA's terms that names the limit, a score of 0 where the kernel cannot run, never a
traceback, a path of the grading machine or a regrade flag (the emulator, which runs every
safety item, used to raise MemoryError or ValueError on these)."""

from __future__ import annotations

import pytest

from .conftest import assert_sound, reference

AFTER_BASE = "int base = blockIdx.x * BLOCK;\n"


def window_sum(globals_: str = "", body: str = "", use: str = "") -> str:
    """The reference window_sum with ``globals_`` before the kernel, ``body`` at its start and
    ``use`` added to each output."""
    source = reference("window_sum")
    source = source.replace("__global__ void window_sum", globals_ + "\n__global__ void window_sum", 1)
    source = source.replace(AFTER_BASE, AFTER_BASE + body + "\n", 1)
    return source.replace("y[base + t] = sum;", f"y[base + t] = sum{use};", 1)


def scores(result) -> dict[str, float]:
    return {t["name"]: t["score"] for t in result.results["tests"] if "performance" not in t["tags"]}


def outputs(result) -> str:
    return "\n".join(t["output"] for t in result.results["tests"])


CANNOT_RUN = {
    "a 1 GiB __shared__ array": (
        window_sum(
            body="__shared__ float big[1 << 28]; big[t] = 1.0f; __syncthreads();", use=" + big[t] * 0"
        ),
        "kernel window_sum declares 1,073,741,968 bytes of __shared__ memory",  # + a tile of 36
        "an H200 (sm_90) allows at most 49,152 bytes (48 KiB) of static shared memory per block",
    ),
    "a 4 GiB __device__ array": (
        window_sum(
            "__device__ float scratch[1u << 30];", "scratch[base + t] = 1.0f;", " + scratch[base + t] * 0"
        ),
        "__device__ variables take 4,294,967,296 bytes",
        "holds at most 268,435,456 bytes (256 MiB) of them (a limit of this grader, not of a GPU)",
    ),
    "80 KB of __constant__ memory": (
        window_sum("__constant__ float weights[20000];", use=" + weights[t]"),
        "declares 80,000 bytes of __constant__ memory",
        "a GPU has 65,536 bytes (64 KiB) of it",
    ),
    "barrier 20": (
        window_sum(body='asm volatile("bar.sync 20;");'),
        "barrier number 20 is out of range",
        "a block has barriers 0 to 15",
    ),
    "a barrier for 33 threads": (
        window_sum(body='asm volatile("bar.sync 1, %0;" :: "r"(n - n + 33));'),
        "reached a barrier for 33 threads",
        "illegal instruction, which aborts the whole kernel",
    ),
    "an extra parameter": (
        window_sum().replace("float* __restrict__ y, int n)", "float* __restrict__ y, int n, int m)"),
        "kernel window_sum takes 4 parameters but the assignment launches it with 3 arguments (x, y, n)",
        "keep the starter file's signature",
    ),
}


@pytest.mark.parametrize("name", list(CANNOT_RUN))
def test_a_request_no_gpu_grants_scores_zero_with_a_sentence_naming_the_limit(graded, name):
    source, what, limit = CANNOT_RUN[name]
    result = graded({"window_sum.cu": source})
    assert_sound(result)  # no traceback, no host path, no regrade flag
    assert set(scores(result).values()) == {0.0}, scores(result)
    text = outputs(result)
    assert what in text and limit in text, text[:3000]


def test_printf_of_percent_n_prints_as_a_gpu_prints(graded):
    # an H200 prints "%n" as written and writes nothing; the kernel is right otherwise
    body = 'int written = 0; if (base + t == 0) printf("x%ny\\n", &written);'
    result = graded({"window_sum.cu": window_sum(body=body, use=" + written")})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 4 and result.score("bounds (safety)") == 2
