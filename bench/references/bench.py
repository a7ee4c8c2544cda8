"""Check and time every reference kernel of the course on a GPU, against cuBLAS and a device copy.

Run on the device machine from the repository root (CuPy compiles the references with NVRTC,
torch gives float64 answers, cuBLAS and the copy roof):

    python3 bench/references/bench.py [--quick] [--out DIR]

Every timed output is compared with a float64 torch answer first. Times are medians of CUDA
event timings after a warm-up. The table printed last is what bench/references/results.md records.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import traceback
from pathlib import Path

import cupy as cp
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
ROWS: list[dict] = []


# Variants of vector_add tried beside the reference (not part of the course), to see what its
# fixed one-element-per-thread geometry leaves: the plain kernel, an L2 prefetch-size hint on
# the loads, streaming cache hints, and two other ways of prefetching into L2 the inputs of
# the blocks that run AHEAD elements later (the reference prefetches from every lane).
VECTOR_ADD_BODIES = {
    "plain": "if (i < n) c[i] = a[i] + b[i];",
    "L2::256B loads": """if (i < n) {
        float x, y;
        asm("ld.global.nc.L2::256B.f32 %0, [%1];" : "=f"(x) : "l"(a + i));
        asm("ld.global.nc.L2::256B.f32 %0, [%1];" : "=f"(y) : "l"(b + i));
        c[i] = x + y;
    }""",
    "streaming __ldcs/__stcs": "if (i < n) __stcs(c + i, __ldcs(a + i) + __ldcs(b + i));",
    "prefetch.global.L2 lane 0": """if (threadIdx.x % 32 == 0 && i < n - AHEAD) {
        asm volatile("prefetch.global.L2::evict_last [%0];" :: "l"(a + i + AHEAD));
        asm volatile("prefetch.global.L2::evict_last [%0];" :: "l"(b + i + AHEAD));
    }
    if (i < n) c[i] = a[i] + b[i];""",
    "bulk prefetch thread 0": """if (threadIdx.x == 0 && i + 256 <= n - AHEAD) {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], 1024;" :: "l"(a + i + AHEAD));
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], 1024;" :: "l"(b + i + AHEAD));
    }
    if (i < n) c[i] = a[i] + b[i];""",
}
VECTOR_ADD_VARIANTS = {
    label: "__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,\n"
    "                           float* __restrict__ c, int n) {\n"
    f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    {body}\n}}\n"
    for label, body in VECTOR_ADD_BODIES.items()
}
# window_sum kernels beside the reference: the lecture's shared-memory kernel without the L2
# prefetch, and five global loads per output with no shared memory at all.
WINDOW_SUM_VARIANTS = {
    "shared, no prefetch": """
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[BLOCK + 4];
    int t = threadIdx.x, base = blockIdx.x * BLOCK;
    for (int q = t; q < BLOCK + 4; q += BLOCK) tile[q] = base + q < n + 4 ? x[base + q] : 0.0f;
    __syncthreads();
    if (base + t < n) y[base + t] = tile[t] + tile[t + 1] + tile[t + 2] + tile[t + 3] + tile[t + 4];
}
""",
    "global, five loads": """
__global__ void window_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i + 1] + x[i + 2] + x[i + 3] + x[i + 4];
}
""",
}
VARIANT: dict[str, str] = {}  # assignment -> source to use instead of the reference


def kernel(name: str, shared_bytes: int = 0, **defines):
    """The compiled kernel, allowed ``shared_bytes`` of dynamic shared memory."""
    source = VARIANT.get(name) or (ROOT / "reference" / f"{name}.cu").read_text()
    options = (
        "--std=c++17",
        "-lineinfo",
        "-I/usr/local/cuda/include",
        *(f"-D{k}={v}" for k, v in defines.items()),
    )
    module = cp.RawModule(code=source, options=options, name_expressions=(name,))
    function = module.get_function(name)
    if shared_bytes > 48 * 1024:  # past 48 KiB a kernel must opt in
        function.max_dynamic_shared_size_bytes = shared_bytes
    return function


def median_ms(fn, reps: int = 20, warm: int = 3) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def rand(*shape, dtype=torch.float32):
    sign = torch.randint(0, 2, shape, device="cuda") * 2 - 1
    return ((torch.rand(*shape, device="cuda") + 0.5) * sign).to(dtype)


def cupy_of(t: torch.Tensor):
    return cp.asarray(t)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    if torch.isnan(out).any():
        return float("nan")
    return float((out - ref).norm() / ref.norm())


def record(what: str, case: str, ms: float | None, err: float, work: float, unit: str, roof: float | None):
    rate = work / (ms * 1e-3) if ms else float("nan")
    row = {
        "what": what,
        "case": case,
        "ms": ms,
        "rel_err": err,
        "rate": rate,
        "unit": unit,
        "roof": roof,
        "fraction": rate / roof if roof else None,
    }
    ROWS.append(row)
    frac = f"{100 * row['fraction']:.1f} %" if row["fraction"] else ""
    shown = ms or float("nan")
    print(
        f"{what:40s} {case:24s} {shown:9.3f} ms  {rate / 1e12:8.2f} {unit}  err {err:.1e}  {frac}", flush=True
    )


def guarded(fn):
    def run(*args, **kwargs):
        try:
            fn(*args, **kwargs)
        except Exception:
            print(f"FAILED {fn.__name__}{args}{kwargs}", flush=True)
            traceback.print_exc()

    return run


# --- roofs ----------------------------------------------------------------------------------


@functools.cache
def copy_roof(n: int = 1 << 28) -> float:
    """The device copy bandwidth (bytes read + written per second), measured once per run."""
    src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    src.uniform_()
    ms = median_ms(lambda: dst.copy_(src))
    record("device copy (torch)", f"n={n}", ms, 0.0, 8 * n, "TB/s", None)
    return 8 * n / (ms * 1e-3)


def sgemm_roof(M: int, N: int, K: int, transposed: bool) -> float:
    A = rand(K, M) if transposed else rand(M, K)
    B = rand(K, N)
    fn = (lambda: A.t() @ B) if transposed else (lambda: A @ B)
    ms = median_ms(fn)
    label = f"cuBLAS SGEMM {'AtB' if transposed else 'AB'}"
    record(label, f"{M}x{N}x{K}", ms, 0.0, 2 * M * N * K, "TFLOP/s", None)
    return 2 * M * N * K / (ms * 1e-3)


def hgemm_roof(M: int, N: int, K: int) -> float:
    A, B = rand(M, K, dtype=torch.half), rand(K, N, dtype=torch.half)
    ms = median_ms(lambda: A @ B)
    record("cuBLAS HGEMM AB (fp16)", f"{M}x{N}x{K}", ms, 0.0, 2 * M * N * K, "TFLOP/s", None)
    return 2 * M * N * K / (ms * 1e-3)


# --- memory-bound kernels ---------------------------------------------------------------------


@guarded
def vector_add(n: int, roof: float, label: str = "vector_add", **defines):
    f = kernel("vector_add", **defines)
    a, b = rand(n), rand(n)
    c = torch.full((n,), float("nan"), device="cuda")
    args = (cupy_of(a), cupy_of(b), cupy_of(c), np.int32(n))
    launch = lambda: f((cdiv(n, 256),), (256,), args)  # noqa: E731
    launch()
    err = rel_err(c, a.double() + b.double())
    label += "".join(f" {k}={v}" for k, v in defines.items())
    record(label, f"n={n}", median_ms(launch), err, 12 * n, "TB/s", roof)


@guarded
def window_sum(n: int, T: int, roof: float, label: str = "window_sum", **defines):
    f = kernel("window_sum", BLOCK=T, **defines)
    x = rand(n + 4)
    y = torch.full((n,), float("nan"), device="cuda")
    args = (cupy_of(x), cupy_of(y), np.int32(n))
    launch = lambda: f((cdiv(n, T),), (T,), args)  # noqa: E731
    launch()
    xd = x.double()
    err = rel_err(y, sum(xd[d : d + n] for d in range(5)))
    label += f" T={T}" + "".join(f" {k}={v}" for k, v in defines.items())
    record(label, f"n={n}", median_ms(launch), err, 8 * n, "TB/s", roof)


@guarded
def transpose(rows: int, cols: int, T: int, R: int, roof: float):
    f = kernel("transpose", TILE=T, BLOCK_ROWS=R)
    x = rand(rows, cols)
    y = torch.full((cols, rows), float("nan"), device="cuda")
    args = (cupy_of(x), cupy_of(y), np.int32(rows), np.int32(cols))
    launch = lambda: f((cdiv(cols, T), cdiv(rows, T)), (T, R), args)  # noqa: E731
    launch()
    err = float((y != x.t()).sum())  # exact copy expected: count of wrong entries
    label = f"transpose TILE={T} ROWS={R}"
    record(label, f"{rows}x{cols}", median_ms(launch), err, 8 * rows * cols, "TB/s", roof)


@guarded
def reduction(n: int, T: int, G: int, roof: float):
    f = kernel("reduction", BLOCK=T)
    x = rand(n)
    s = torch.full((1,), 0.75, device="cuda")
    args = (cupy_of(x), cupy_of(s), np.int32(n))
    launch = lambda: f((min(cdiv(n, T), G),), (T,), args)  # noqa: E731
    launch()
    want = 0.75 + x.double().sum()
    err = float(abs(s.double() - want) / max(abs(want), 1.0))
    record(f"reduction T={T} G={G}", f"n={n}", median_ms(launch), err, 4 * n, "TB/s", roof)


# --- GEMMs ------------------------------------------------------------------------------------


def atb_case(M, N, K, dtype=torch.float32):
    """The lecture's layout C = AᵀB: A is K x M, B is K x N."""
    A, B = rand(K, M, dtype=dtype), rand(K, N, dtype=dtype)
    return A, B, A.double().t() @ B.double()


def ab_case(M, N, K, dtype=torch.float32):
    """C = AB: A is M x K, B is K x N."""
    A, B = rand(M, K, dtype=dtype), rand(K, N, dtype=dtype)
    return A, B, A.double() @ B.double()


@guarded
def product(
    name: str,
    case,
    M: int,
    N: int,
    K: int,
    roof: float,
    block,
    grid,
    dtype=torch.float32,
    reps=10,
    shared_bytes=0,
    **defines,
):
    """Time one matrix-product kernel on fresh inputs from ``case`` and record it against ``roof``."""
    f = kernel(name, shared_bytes, **defines)
    A, B, want = case(M, N, K, dtype)
    C = torch.full((M, N), float("nan"), device="cuda")
    args = (cupy_of(A), cupy_of(B), cupy_of(C), np.int32(M), np.int32(N), np.int32(K))
    launch = lambda: f(grid, block, args, shared_mem=shared_bytes)  # noqa: E731
    launch()
    err = rel_err(C, want)
    label = name + "".join(f" {k}={v}" for k, v in defines.items())
    record(label, f"{M}x{N}x{K}", median_ms(launch, reps=reps), err, 2 * M * N * K, "TFLOP/s", roof)


def matmul(name: str, *args, **kwargs):
    product(name, atb_case, *args, **kwargs)


def gemm(name: str, *args, **kwargs):
    product(name, ab_case, *args, **kwargs)


def matmul_naive(M, N, K, roof):
    matmul("matmul_naive", M, N, K, roof, (16, 16), (cdiv(N, 16), cdiv(M, 16)))


def matmul_register_tile(M, N, K, V, roof):
    matmul("matmul_register_tile", M, N, K, roof, (16, 16), (cdiv(N, 16 * V), cdiv(M, 16 * V)), V=V)


def matmul_block_tile(M, N, K, L, V, S, roof):
    matmul("matmul_block_tile", M, N, K, roof, (L // V, L // V), (cdiv(N, L), cdiv(M, L)), L=L, V=V, S=S)


def gemm_tiled(M, N, K, T, roof):
    gemm("gemm_tiled", M, N, K, roof, (T, T), (cdiv(N, T), cdiv(M, T)), TILE=T)


def gemm_tensor_core(M, N, K, roof, WARPS_M=2, WARPS_N=2, FRAG_M=4, FRAG_N=4, BK=64, STAGES=2, MIN_BLOCKS=3):
    BM, BN, NT = 16 * FRAG_M * WARPS_M, 16 * FRAG_N * WARPS_N, 32 * WARPS_M * WARPS_N
    shared_bytes = STAGES * (BM * (BK + 8) + BK * (BN + 8)) * 2  # the reference's ring of buffers
    gemm(
        "gemm_tensor_core",
        M,
        N,
        K,
        roof,
        (NT,),
        (cdiv(N, BN), cdiv(M, BM)),
        dtype=torch.half,
        shared_bytes=shared_bytes,
        WARPS_M=WARPS_M,
        WARPS_N=WARPS_N,
        FRAG_M=FRAG_M,
        FRAG_N=FRAG_N,
        BK=BK,
        STAGES=STAGES,
        MIN_BLOCKS=MIN_BLOCKS,
    )


def check_ragged() -> None:
    """Correctness on ragged shapes (not timed for their speed)."""
    for n in (1, 1000, 1_000_003):
        vector_add(n, None)
        window_sum(n, 32, None)
        reduction(n, 256, 64, None)
    transpose(1000, 999, 32, 8, None)
    transpose(70, 17, 16, 4, None)
    for M, N, K in ((1, 1, 1), (130, 129, 9), (257, 129, 65)):
        matmul_naive(M, N, K, None)
        for V in (2, 4):
            matmul_register_tile(M, N, K, V, None)
        for L, V, S in ((32, 4, 8), (64, 8, 8), (64, 4, 16), (128, 8, 8)):
            matmul_block_tile(M, N, K, L, V, S, None)
        for T in (8, 16, 32):
            gemm_tiled(M, N, K, T, None)
        gemm_tensor_core(M, N, K, None)


def bench_vector_add() -> None:
    big, copy = 1 << 26, copy_roof()
    vector_add(big, copy)
    vector_add(1 << 28, copy)
    for ahead in (1 << 18, 1 << 19):
        vector_add(big, copy, AHEAD=ahead)
    for label, source in VECTOR_ADD_VARIANTS.items():
        VARIANT["vector_add"] = source
        aheads = (1 << 19, 1 << 20) if "AHEAD" in source else (None,)
        for ahead in aheads:
            defines = {"AHEAD": ahead} if ahead else {}
            vector_add(1000, None, label, **defines)
            vector_add(1_000_003, None, label, **defines)
            vector_add(big, copy, label, **defines)
    VARIANT.clear()


def bench_memory() -> None:
    big, copy = 1 << 26, copy_roof()
    window_sum(big, 256, copy)
    window_sum(big, 128, copy)
    for ahead in (1 << 18, 1 << 19, 1 << 30):  # 2^30: no prefetch
        window_sum(big, 256, copy, AHEAD=ahead)
    for label, source in WINDOW_SUM_VARIANTS.items():
        VARIANT["window_sum"] = source
        window_sum(1_000_003, 256, None, label)
        window_sum(big, 256, copy, label)
    VARIANT.clear()
    for T, R in ((32, 8), (32, 4), (32, 16), (32, 32), (64, 8), (64, 16)):
        transpose(8192, 8192, T, R, copy)
    transpose(8191, 8193, 32, 8, copy)
    transpose(8191, 8193, 64, 8, copy)
    transpose(1000, 999, 64, 8, None)
    for T, G in ((256, 1056), (256, 2112), (512, 528), (128, 2112), (256, 4224)):
        reduction(big, T, G, copy)
    reduction(1 << 28, 256, 1056, copy)


def bench_fp32_gemm() -> None:
    s4096 = sgemm_roof(4096, 4096, 4096, transposed=True)
    sgemm_roof(4096, 4096, 4096, transposed=False)
    s_ffn = sgemm_roof(2048, 11008, 4096, transposed=False)
    matmul_naive(2048, 2048, 2048, s4096)
    for V in (2, 4):
        matmul_register_tile(4096, 4096, 4096, V, s4096)
    for L, V, S in (
        (32, 4, 8),
        (64, 4, 8),
        (64, 8, 8),
        (64, 8, 16),
        (128, 8, 8),
        (128, 8, 16),
        (128, 8, 4),
        (128, 4, 8),
        (64, 4, 16),
    ):
        matmul_block_tile(4096, 4096, 4096, L, V, S, s4096)
    matmul_block_tile(2053, 2039, 2048, 128, 8, 8, s4096)
    for T in (8, 16, 32):
        gemm_tiled(4096, 4096, 4096, T, s4096)
        gemm_tiled(2048, 11008, 4096, T, s_ffn)
    gemm_tiled(2053, 2039, 2048, 32, s4096)


# gemm_tensor_core configurations swept beside the default (2 x 2 warps of 4 x 4 fragments,
# BK = 64, 2 stages, 3 blocks per multiprocessor): warp tiles 64 x 32 and 32 x 64, 8 and 16
# warps, 128 x 256 and 256 x 128 block tiles, deeper rings.
TENSOR_CORE_SWEEP = (
    {},
    {"STAGES": 3, "MIN_BLOCKS": 2},
    {"BK": 32, "STAGES": 3},
    {"BK": 32, "STAGES": 2},
    {"WARPS_N": 4, "FRAG_N": 2, "MIN_BLOCKS": 1},
    {"WARPS_N": 4, "FRAG_N": 2, "STAGES": 3, "MIN_BLOCKS": 1},
    {"WARPS_N": 4, "FRAG_N": 2, "BK": 32, "STAGES": 4, "MIN_BLOCKS": 1},
    {"WARPS_M": 4, "WARPS_N": 4, "FRAG_N": 2, "MIN_BLOCKS": 1},  # 256 x 128
    {"WARPS_M": 4, "WARPS_N": 4, "FRAG_M": 2, "MIN_BLOCKS": 1},  # 128 x 256
    {"WARPS_M": 4, "MIN_BLOCKS": 1},  # 256 x 128
)


def bench_tensor_core() -> None:
    h4096 = hgemm_roof(4096, 4096, 4096)
    for cfg in TENSOR_CORE_SWEEP:
        gemm_tensor_core(257, 129, 65, None, **cfg)
        gemm_tensor_core(4096, 4096, 4096, h4096, **cfg)
    gemm_tensor_core(2053, 2039, 2048, h4096)


SECTIONS = {
    "vector_add": bench_vector_add,
    "memory": bench_memory,
    "fp32_gemm": bench_fp32_gemm,
    "tensor_core": bench_tensor_core,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--quick", action="store_true", help="correctness on small ragged shapes only")
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run only these timed sections")
    args = parser.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, cp.__version__, flush=True)
    check_ragged()
    if args.quick:
        return
    for name in args.only or SECTIONS:
        SECTIONS[name]()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"device": torch.cuda.get_device_name(), "rows": ROWS}
    (out / "bench.json").write_text(json.dumps(summary, indent=1))
    print("\n=== timed rows (fraction of roof) ===")
    for row in ROWS:
        if row["roof"]:
            print(
                f"{row['what'][:80]:80s} {row['case']:16s} {row['ms']:8.3f} ms {row['rate'] / 1e12:7.2f} "
                f"{row['unit']:7s} {100 * row['fraction']:5.1f} %  err {row['rel_err']:.0e}"
            )


if __name__ == "__main__":
    sys.exit(main())
