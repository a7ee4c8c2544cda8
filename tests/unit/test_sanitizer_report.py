"""The compute-sanitizer report parser, on outputs written from its documented text format."""

from pathlib import Path

import numpy as np

from autograder.contract import FINDING_CHECKS, Buffer, Launch, Program, Scalar
from autograder.grading import sanitizer_report as report

MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at vector_add+0x90 in /tmp/grade/vector_add.cu:5
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f3c5e600fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3c5e600000 of size 4,000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f7a4e] in libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at vector_add+0x90 in /tmp/grade/vector_add.cu:5
=========     by thread (233,0,0) in block (3,0,0)
=========     Address 0x7f3c5e600fa4 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f3c5e600000 of size 4,000 bytes
=========
========= Invalid __global__ read of size 4 bytes
=========     at vector_add+0x70 in /tmp/grade/vector_add.cu:5
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f3c5e601fa0 is out of bounds
=========     and is 4,097 bytes after the nearest allocation at 0x7f3c5e601000 of size 3,000 bytes
=========
========= ERROR SUMMARY: 3 errors
"""

MEMCHECK_OLD = """\
========= CUDA-MEMCHECK
========= Invalid __shared__ read of size 4
=========     at 0x000000c8 in /home/u/window_sum.cu:14:window_sum(float const*, float*, int)
=========     by thread (9,0,0) in block (0,0,0)
=========     Address 0x00000410 is out of bounds
=========
========= Invalid __global__ read of size 8
=========     at 0x000000d0 in /home/u/window_sum.cu:16:window_sum(float const*, float*, int)
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f0000000003 is misaligned
=========
========= ERROR SUMMARY: 2 errors
"""

INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at gemm+0x1c0 in gemm.cu:21
=========     by thread (3,1,0) in block (0,2,0)
=========     Address 0x7f0000400000
=========
========= ERROR SUMMARY: 1 error
"""

RACECHECK_HAZARD = """\
========= COMPUTE-SANITIZER
========= Error: Potential WAR hazard detected at __shared__ 0x84 in block (2,0,0) :
=========     Read Thread (31,0,0) at window_sum+0x1a0 in window_sum.cu:16
=========     Write Thread (1,0,0) at window_sum+0x120 in window_sum.cu:12
=========     Current Value : 0, Incoming Value : 1
=========
========= Error: Potential RAW hazard detected at __shared__ 0x88 in block (3,0,0) :
=========     Write Thread (2, 0, 0) at 0x00001078 in window_sum.cu:12:window_sum(float const*, float*, int)
=========     Read Thread (30, 0, 0) at 0x00000748 in window_sum.cu:16:window_sum(float const*, float*, int)
=========     Current Value : 194
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""

RACECHECK_ANALYSIS = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at gemm_tiled+0x3e0 in gemm_tiled.cu:24
=========     and Read access at gemm_tiled+0x4f0 in gemm_tiled.cu:29 [4096 hazards]
=========     and Read access at gemm_tiled+0x510 in gemm_tiled.cu:29 [2048 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

# CUDA 12.4+ splits the device frame over two lines; CUDA 13 says "Access to ... is out of bounds".
MEMCHECK_NEW = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at matmul_naive(const float *, const float *, float *, int, int, int)+0x1f0
=========        in matmul_naive.cu:12
=========     by thread (5,15,0) in block (2,7,0)
=========     Access to 0x7f31c2a04000 is out of bounds
=========     and is 8 bytes after the nearest allocation at 0x7f31c2a00000 of size 16,376 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernel [0x3ea1c] in libcuda.so.1
=========
========= Program hit cudaErrorMisalignedAddress (error 716) due to "misaligned address" on CUDA API call to
=========   cuCtxSynchronize.
=========
========= ERROR SUMMARY: 2 errors
"""

# byte for byte the H200 report on the guarded tests/gpu/kernels/vector_add.cu (2026-11-29)
CLEAN = """\
========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""


def test_memcheck_out_of_bounds_write_names_thread_block_line_and_element():
    allocations = {4000: report.Allocation("c", 4)}
    findings = report.parse(MEMCHECK, "memcheck", allocations)
    write = next(f for f in findings if f.kind == "out_of_bounds_write")
    assert (write.line, write.thread, write.block) == (5, (232, 0, 0), (3, 0, 0))
    assert (write.array, write.index, write.bound) == ("c", 1000, 1000)
    assert write.others == 1  # thread 233 collapsed into it
    assert write.message == (
        "vector_add.cu:5: thread (232,0,0) of block (3,0,0) wrote c[1000] past its end "
        "(c has 1000 elements) [compute-sanitizer memcheck]"
    )


def test_memcheck_unknown_allocation_reports_bytes_past_the_end():
    read = next(f for f in report.parse(MEMCHECK, "memcheck") if f.kind == "out_of_bounds_read")
    assert read.array is None and read.line == 5
    assert "4097 bytes after the end of an allocation of 3000 bytes" in read.message


def test_memcheck_old_format_shared_and_misaligned():
    findings = report.parse(MEMCHECK_OLD, "memcheck")
    kinds = {f.kind: f for f in findings}
    assert set(kinds) == {"out_of_bounds_read", "misaligned_access"}
    shared = kinds["out_of_bounds_read"]
    assert (shared.line, shared.thread) == (14, (9, 0, 0))
    assert "__shared__" in shared.message and shared.message.startswith("window_sum.cu:14:")
    assert kinds["misaligned_access"].line == 16


def test_memcheck_new_format_split_location_and_access_wording():
    (finding,) = report.parse(MEMCHECK_NEW, "memcheck", {16376: report.Allocation("A", 4)})
    assert finding.kind == "out_of_bounds_read"  # the API error after the report is no part of it
    assert (finding.line, finding.thread, finding.block) == (12, (5, 15, 0), (2, 7, 0))
    assert (finding.array, finding.index, finding.bound) == ("A", 4096, 4094)
    assert finding.message.startswith("matmul_naive.cu:12: thread (5,15,0) of block (2,7,0) read A[4096]")


def test_initcheck_uninitialized_global_read():
    (finding,) = report.parse(INITCHECK, "initcheck")
    assert finding.kind == "uninitialized_global_read"
    assert (finding.line, finding.thread, finding.block) == (21, (3, 1, 0), (0, 2, 0))
    assert finding.check == "bounds"


def test_racecheck_hazard_report_names_both_threads_and_lines():
    (finding,) = report.parse(RACECHECK_HAZARD, "racecheck")
    assert finding.kind == "shared_race" and finding.check == "barriers"
    assert (finding.line, finding.thread, finding.block) == (12, (1, 0, 0), (2, 0, 0))
    assert finding.others == 1
    assert "WAR race on shared memory in block (2,0,0)" in finding.message
    assert "write by thread (1,0,0) at window_sum.cu:12" in finding.message


def test_racecheck_analysis_report_counts_hazards():
    (finding,) = report.parse(RACECHECK_ANALYSIS, "racecheck")
    assert finding.kind == "shared_race" and finding.line == 24
    assert "6144 hazards" in finding.message
    assert "a read at gemm_tiled.cu:29" in finding.message


def test_clean_run_has_no_findings_and_a_zero_count():
    assert report.parse(CLEAN, "memcheck") == []
    assert report.error_count(CLEAN) == 0
    assert report.error_count(MEMCHECK) == 3
    assert report.error_count("python crashed") is None


def test_every_kind_is_a_known_finding_kind():
    texts = MEMCHECK + MEMCHECK_OLD + INITCHECK + RACECHECK_HAZARD + RACECHECK_ANALYSIS
    assert {f.kind for f in report.parse(texts, "memcheck")} <= set(FINDING_CHECKS)


def test_program_output_between_reports_is_ignored():
    text = "hello from printf\n" + MEMCHECK.replace("=========\n", "=========\nsome stdout\n", 1)
    assert len(report.parse(text, "memcheck")) == 2


def _launch(n):
    return Launch(
        Program("", "vector_add.cu", "vector_add"),
        grid=(-(-n // 256), 1, 1),
        block=(256, 1, 1),
        args=(
            Buffer("a", np.ones(n, np.float32)),
            Buffer("b", np.ones(n, np.float32)),
            Buffer("c", np.full(n, np.nan, np.float32), is_output=True),
            Scalar("n", n),
        ),
    )


def test_allocations_name_an_array_only_when_its_size_is_unique():
    allocations = report.allocations_of([_launch(1000)])
    assert allocations[4000] == report.Allocation("a, b or c", 4, unique=False)
    findings = report.parse(MEMCHECK, "memcheck", allocations)
    write = next(f for f in findings if f.kind == "out_of_bounds_write")
    assert write.array is None and (write.index, write.bound) == (1000, 1000)
    assert "wrote element 1000 of a, b or c past its end (each has 1000 elements)" in write.message


# A real report: compute-sanitizer memcheck (CUDA 13) on an NVIDIA H200, 2026-11-29, from
# bench/perf_bench.py part s (``--parts s``): tests/gpu/kernels/vector_add_unguarded.cu, n = 1000,
# block 256. Trimmed from the raw log (cut at LOG_LIMIT characters): its first two records
# verbatim but for the Host Frame backtrace (one frame kept of each), then the run's own summary
# line (26 errors), which the cut had dropped.
H200_MEMCHECK_UNGUARDED = Path(__file__).parent / "data" / "memcheck-h200-vector_add_unguarded.log"


def test_real_h200_memcheck_log_names_the_unguarded_read():
    text = H200_MEMCHECK_UNGUARDED.read_text()
    (finding,) = report.parse(text, "memcheck", report.allocations_of([_launch(1000)]))
    assert finding.kind == "out_of_bounds_read" and finding.check == "bounds"
    assert (finding.line, finding.thread, finding.block) == (4, (232, 0, 0), (3, 0, 0))
    assert (finding.index, finding.bound, finding.others) == (1000, 1000, 1)  # thread 233 collapsed
    assert finding.message == (
        "vector_add_unguarded.cu:4: thread (232,0,0) of block (3,0,0) read element 1000 of "
        "a, b or c past its end (each has 1000 elements) [compute-sanitizer memcheck]"
    )
    assert report.error_count(text) == 26
