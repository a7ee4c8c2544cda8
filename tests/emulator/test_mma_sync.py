"""Tensor-core PTX the ISA specifies lane by lane (mma.sync, ldmatrix, stmatrix) and bf16
arithmetic, each against a reference written here from the PTX ISA's own words."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar, Unsupported

from .helpers import launch, line_of, out

WARPS = 4  # independent problems per launch: two blocks of two warps


# ----- references ---------------------------------------------------------------------
_POSITIVE = np.arange(0x7F81, dtype=np.uint32)  # the bits of +0 .. +inf, in increasing order
_LATTICE = (_POSITIVE << 16).view(np.float32).astype(np.float64)


def bf16_reference(x, rounding: str = "rn") -> np.ndarray:
    """The bf16 bits of each exact value ``x`` (f64, finite, not above the largest bf16),
    found among every bf16 value rather than by manipulating bits."""
    x = np.asarray(x, np.float64)
    size = np.abs(x)
    above = np.searchsorted(_LATTICE, size)  # the first bf16 >= |x|
    below = np.where(_LATTICE[above] == size, above, above - 1)
    nearer = np.where(size - _LATTICE[below] < _LATTICE[above] - size, below, above)
    tie = size - _LATTICE[below] == _LATTICE[above] - size
    pick = {
        "rn": np.where(tie, np.where(below % 2 == 0, below, above), nearer),
        "rz": below,
        "rm": np.where(np.signbit(x), above, below),
        "rp": np.where(np.signbit(x), below, above),
    }[rounding]
    return _POSITIVE[pick] | np.where(np.signbit(x), np.uint32(0x8000), np.uint32(0))


def bf16_value(bits) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def random_bf16(rng, n: int, low: float = 2.0**-6, high: float = 2.0**6) -> np.ndarray:
    """bf16 bits of random values of both signs, magnitudes in [low, high)."""
    magnitude = np.exp2(rng.uniform(np.log2(low), np.log2(high), n)).astype(np.float32)
    signed = np.where(rng.random(n) < 0.5, -magnitude, magnitude).astype(np.float32)
    return (signed.view(np.uint32) >> 16).astype(np.uint16)


# ----- mma.sync -----------------------------------------------------------------------
ELEMENT = {"f16": "unsigned short", "bf16": "unsigned short", "tf32": "unsigned", "s8": "unsigned char"}
ELEMENT["u8"] = ELEMENT["s8"]
PER_REGISTER = {"f16": 2, "bf16": 2, "tf32": 1, "s8": 4, "u8": 4}


def mma_source(a_type: str, k: int, acc: str, satfinite: bool = False) -> str:
    """One mma.sync per warp on its own A, B, C; every fragment is filled and read back with
    the ISA's formulas ("Matrix Fragments for mma.m16n8k*")."""
    e = PER_REGISTER[a_type]
    ra, rb, rc = 16 * k // 32 // e, k * 8 // 32 // e, 2 if acc == "f16" else 4
    acc_c = {"f32": "float", "s32": "int", "f16": "unsigned short"}[acc]
    reg_c, flag = ("unsigned", "r") if acc != "f32" else ("float", "f")
    regs = iter(range(100))
    d_ops = ", ".join(f"%{next(regs)}" for _ in range(rc))
    a_ops = ", ".join(f"%{next(regs)}" for _ in range(ra))
    b_ops = ", ".join(f"%{next(regs)}" for _ in range(rb))
    c_ops = ", ".join(f"%{next(regs)}" for _ in range(rc))
    outputs = ", ".join(f'"={flag}"(d[{i}])' for i in range(rc))
    inputs = ", ".join(
        [f'"r"(a[{i}])' for i in range(ra)]
        + [f'"r"(b[{i}])' for i in range(rb)]
        + [f'"{flag}"(c[{i}])' for i in range(rc)]
    )
    sat = ".satfinite" if satfinite else ""
    opcode = f"mma.sync.aligned.m16n8k{k}.row.col{sat}.{acc}.{a_type}.{a_type}.{acc}"
    if acc == "f16":  # two elements a register, the first in the low half
        load_c = "for (int j = 0; j < 2; ++j) c[j] = C[at(2 * j)] | ((unsigned)C[at(2 * j + 1)] << 16);"
        store_d = (
            "for (int j = 0; j < 2; ++j) { D[at(2 * j)] = d[j] & 0xFFFF; D[at(2 * j + 1)] = d[j] >> 16; }"
        )
    else:
        load_c = "for (int i = 0; i < 4; ++i) c[i] = C[at(i)];"
        store_d = "for (int i = 0; i < 4; ++i) D[at(i)] = d[i];"
    return rf"""
#define K {k}
#define E {e}  // elements a 32-bit register holds
extern "C" __global__ void one_mma(const {ELEMENT[a_type]}* A, const {ELEMENT[a_type]}* B,
                                   const {acc_c}* C, {acc_c}* D) {{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    int g = lane / 4, t = lane % 4;  // the ISA's groupID and threadID_in_group
    A += warp * 16 * K;
    B += warp * K * 8;
    C += warp * 128;
    D += warp * 128;
    auto at = [&](int i) {{ return (g + 8 * (i / 2)) * 8 + 2 * t + i % 2; }};  // C and D
    unsigned a[{ra}], b[{rb}];
    {reg_c} c[{rc}], d[{rc}];
    for (int r = 0; r < {ra}; ++r) {{
        a[r] = 0;
        for (int p = 0; p < E; ++p) {{
#ifdef PLANTED_BUG
            int row = g + 8 * (r / 2), col = E * t + p + 4 * E * (r % 2);  // rows and columns swapped
#else
            int row = g + 8 * (r % 2), col = E * t + p + 4 * E * (r / 2);
#endif
            a[r] |= (unsigned)A[row * K + col] << (32 / E * p);
        }}
    }}
    for (int r = 0; r < {rb}; ++r) {{
        b[r] = 0;
        for (int p = 0; p < E; ++p) b[r] |= (unsigned)B[(E * t + p + 4 * E * r) * 8 + g] << (32 / E * p);
    }}
    {load_c}
    asm volatile("{opcode} {{{d_ops}}}, {{{a_ops}}}, {{{b_ops}}}, {{{c_ops}}};"
                 : {outputs}
                 : {inputs});
    {store_d}
}}
"""


def _inputs(rng, a_type: str, k: int, acc: str):
    """Integer-valued A (WARPS x 16 x k), B (WARPS x k x 8), C: (their bits, their values)."""
    shape_a, shape_b = (WARPS, 16, k), (WARPS, k, 8)
    if a_type in ("s8", "u8"):
        low, high = (-128, 128) if a_type == "s8" else (0, 256)
        a, b = rng.integers(low, high, shape_a), rng.integers(low, high, shape_b)
        bits = [x.astype(np.int8 if a_type == "s8" else np.uint8).view(np.uint8).ravel() for x in (a, b)]
        c = rng.integers(-(2**20), 2**20, (WARPS, 16, 8)).astype(np.int32)
        return bits, (a, b), c, c.ravel()
    a, b = (rng.integers(-8, 9, s).astype(np.float32) for s in (shape_a, shape_b))
    if a_type == "f16":
        bits = [x.astype(np.float16).view(np.uint16).ravel() for x in (a, b)]
    elif a_type == "bf16":
        bits = [(x.view(np.uint32) >> 16).astype(np.uint16).ravel() for x in (a, b)]
    else:  # tf32: bits below the 10-bit mantissa are ignored, so 2^-14 of a value >= 1 is
        a, b = (np.where(x == 0, 1, x).astype(np.float32) for x in (a, b))
        bits = [(x + np.copysign(2.0**-14, x)).astype(np.float32).view(np.uint32).ravel() for x in (a, b)]
    c = rng.integers(-64, 65, (WARPS, 16, 8)).astype(np.float32)
    c_bits = c.astype(np.float16).view(np.uint16).ravel() if acc == "f16" else c.ravel()
    return bits, (a, b), c, c_bits


def run_mma(rng, a_type: str, k: int, acc: str, defines=(), satfinite: bool = False, c=None):
    (a_bits, b_bits), (a, b), c_values, c_bits = _inputs(rng, a_type, k, acc)
    if c is not None:
        c_values, c_bits = c, c.ravel()
    d_type = {"f32": np.float32, "s32": np.int32, "f16": np.uint16}[acc]
    source = mma_source(a_type, k, acc, satfinite)
    result = launch(
        source,
        "one_mma",
        2,
        64,
        [Buffer("A", a_bits), Buffer("B", b_bits), Buffer("C", c_bits), out("D", WARPS * 128, d_type)],
        defines=defines,
    )
    d = result.outputs["D"].reshape(WARPS, 16, 8)
    if acc == "f16":
        d = d.view(np.float16)
    wide = np.int64 if acc == "s32" else np.float64
    expected = np.matmul(a.astype(wide), b.astype(wide)) + c_values.astype(wide)
    return result, d, expected, source


MMA_CASES = [
    ("f16", 16, "f32"),
    ("f16", 8, "f32"),
    ("f16", 16, "f16"),
    ("f16", 8, "f16"),
    ("bf16", 16, "f32"),
    ("bf16", 8, "f32"),
    ("tf32", 8, "f32"),
    ("tf32", 4, "f32"),
    ("s8", 32, "s32"),
    ("u8", 16, "s32"),
]


@pytest.mark.parametrize(("a_type", "k", "acc"), MMA_CASES)
def test_mma_sync_fragments_are_the_isas(rng, a_type, k, acc):
    """Integer-valued inputs: every sum is exact, so D must equal A B + C exactly; each warp
    counts one warp instruction and 2 x 16 x 8 x K flops (floating-point inputs)."""
    result, d, expected, source = run_mma(rng, a_type, k, acc)
    np.testing.assert_array_equal(d, expected)
    assert result.findings == []
    flops = WARPS * 2 * 16 * 8 * k if a_type in ("f16", "bf16", "tf32") else 0
    assert result.counters.totals["flops"] == flops
    line = result.counters.by_line[line_of(source, "asm volatile")]
    assert line["warp_instructions"] == WARPS and line["lane_instructions"] == 32 * WARPS


def test_a_fragment_filled_in_the_wrong_layout_is_a_wrong_answer(rng):
    _, d, expected, _ = run_mma(rng, "f16", 16, "f32", defines=(("PLANTED_BUG", "1"),))
    assert not np.array_equal(d, expected)


def test_mma_sync_rounds_an_f32_sum_once(rng):
    """Random f16 and bf16 inputs: products are exact and the f32 result is the f64 sum
    rounded once, so it lies within half an f32 ulp of |A||B| + |C| of the exact answer."""
    for a_type in ("f16", "bf16"):
        if a_type == "f16":
            a_bits, b_bits = (
                rng.uniform(-2, 2, n).astype(np.float16).view(np.uint16) for n in (16 * 16, 16 * 8)
            )
            a, b = (x.view(np.float16).astype(np.float64) for x in (a_bits, b_bits))
        else:
            a_bits, b_bits = random_bf16(rng, 16 * 16), random_bf16(rng, 16 * 8)
            a, b = bf16_value(a_bits), bf16_value(b_bits)
        a_bits, b_bits = np.tile(a_bits, WARPS), np.tile(b_bits, WARPS)
        c = rng.standard_normal(WARPS * 128).astype(np.float32)
        result = launch(
            mma_source(a_type, 16, "f32"),
            "one_mma",
            2,
            64,
            [Buffer("A", a_bits), Buffer("B", b_bits), Buffer("C", c), out("D", WARPS * 128)],
        )
        c = c.reshape(WARPS, 16, 8).astype(np.float64)
        exact = a.reshape(16, 16) @ b.reshape(16, 8) + c
        bound = 2.0**-24 * (np.abs(a.reshape(16, 16)) @ np.abs(b.reshape(16, 8)) + np.abs(c))
        assert (np.abs(result.outputs["D"].reshape(WARPS, 16, 8) - exact) <= bound).all(), a_type


def test_integer_mma_saturates_only_when_asked(rng):
    c = np.full((WARPS, 16, 8), 2**31 - 100, np.int32)
    _, wrapped, expected, _ = run_mma(rng, "u8", 16, "s32", c=c)
    _, clamped, _, _ = run_mma(rng, "u8", 16, "s32", satfinite=True, c=c)
    assert (expected > 2**31 - 1).any()
    np.testing.assert_array_equal(wrapped, expected.astype(np.int32))  # two's complement
    assert (clamped == 2**31 - 1).all()


def test_unemulated_mma_shapes_are_named():
    source = r"""
extern "C" __global__ void volta(const unsigned* x, float* y) {
    float d[8];
    unsigned a0 = x[0], a1 = x[1], b0 = x[2], b1 = x[3];
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11}, {%0,%1,%2,%3,%4,%5,%6,%7};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
                   "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
    y[threadIdx.x] = d[0];
}
"""
    with pytest.raises(Unsupported, match=r"kernel.cu:5: mma.sync m8n8k4 with .f16 inputs is not emulated"):
        launch(source, "volta", 1, 32, [Buffer("x", np.ones(4, np.uint32)), out("y", 32)])


# ----- ldmatrix / stmatrix ------------------------------------------------------------
HALF_A_WARP = r"""
extern "C" __global__ void half_a_warp(const unsigned short* x, unsigned* y) {
    __shared__ __align__(16) unsigned short s[64];
    s[threadIdx.x] = x[threadIdx.x];
    s[threadIdx.x + 32] = x[threadIdx.x + 32];
    __syncthreads();
    unsigned r = 0, row = (unsigned)__cvta_generic_to_shared(s) + 16 * (threadIdx.x % 8);
    if (threadIdx.x < 16)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(row));
    y[threadIdx.x] = r;
}
"""


def test_ldmatrix_by_part_of_a_warp_is_refused_where_it_is(rng):
    line = line_of(HALF_A_WARP, "ldmatrix")
    with pytest.raises(Unsupported, match=rf"ldmatrix at kernel.cu:{line} executed by part of a warp"):
        launch(
            HALF_A_WARP,
            "half_a_warp",
            1,
            32,
            [Buffer("x", rng.integers(0, 2**16, 64).astype(np.uint16)), out("y", 32, np.uint32)],
        )


STRIDE = 24  # halves a row of the test tile: 48 bytes, so every row starts 16-byte aligned
ROWS = 32


def matrix_source(op: str, count: int, trans: bool) -> str:
    """``op`` (ldmatrix or stmatrix) with lane l of block b giving row ``row[32 b + l]``,
    column ``col[32 b + l]`` of a shared ROWS x STRIDE tile staged from ``tile``; ldmatrix
    writes the registers to ``regs``, stmatrix takes them from there and copies the tile
    back to ``back``."""
    first = 0 if op == "ldmatrix" else 1
    regs = ", ".join(f"%{first + j}" for j in range(count))
    opcode = f"{op}.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16"
    bound = ", ".join(f'"{"=" if op == "ldmatrix" else ""}r"(r[{j}])' for j in range(count))
    if op == "ldmatrix":
        asm = f'asm volatile("{opcode} {{{regs}}}, [%{count}];" : {bound} : "r"(address));'
        after = "for (int j = 0; j < COUNT; ++j) regs[lane * COUNT + j] = r[j];"
    else:
        asm = f'asm volatile("{opcode} [%0], {{{regs}}};" :: "r"(address), {bound});'
        after = "__syncthreads();\n    for (int i = threadIdx.x; i < TILE; i += 32) "
        after += "back[blockIdx.x * TILE + i] = s[i];"
    return rf"""
#define TILE {ROWS * STRIDE}
#define COUNT {count}
extern "C" __global__ void matrices(const unsigned short* tile, const int* row, const int* col,
                                    unsigned* regs, unsigned short* back) {{
    __shared__ __align__(16) unsigned short s[TILE];
    for (int i = threadIdx.x; i < TILE; i += 32) s[i] = tile[blockIdx.x * TILE + i];
    __syncthreads();
    int lane = blockIdx.x * 32 + threadIdx.x;
    unsigned address = (unsigned)__cvta_generic_to_shared(s) + 2 * (row[lane] * {STRIDE} + col[lane]);
    unsigned r[COUNT];
    for (int j = 0; j < COUNT; ++j) r[j] = regs[lane * COUNT + j];
    {asm}
    {after}
}}
"""


def _rows_and_columns(rng, count: int):
    """Per block, lanes 0 .. 8 count - 1 give distinct rows at column 0 or 8; the others an
    address far outside the tile, which the instruction must ignore."""
    row = np.full((2, 32), 10_000, np.int32)
    col = np.zeros((2, 32), np.int32)
    for block in range(2):
        row[block, : 8 * count] = rng.permutation(ROWS)[: 8 * count]
        col[block, : 8 * count] = 8 * rng.integers(0, 2, 8 * count)
    return row, col


def _element(tile, row, col, block, j, r, c):
    """Row r, column c of matrix j of a block, as the ISA defines the matrices: row r is the
    8 halves at the address lane 8 j + r gives."""
    return int(tile[block, row[block, 8 * j + r] * STRIDE + col[block, 8 * j + r] + c])


def _where(lane: int, h: int, trans: bool) -> tuple[int, int]:
    """The (row, column) of its matrix that half h of a lane's register holds."""
    return (2 * (lane % 4) + h, lane // 4) if trans else (lane // 4, 2 * (lane % 4) + h)


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_gives_each_lane_the_isas_elements(rng, count, trans):
    tile = rng.integers(0, 2**16, (2, ROWS * STRIDE)).astype(np.uint16)
    row, col = _rows_and_columns(rng, count)
    result = launch(
        matrix_source("ldmatrix", count, trans),
        "matrices",
        2,
        32,
        [
            Buffer("tile", tile.ravel()),
            Buffer("row", row.ravel()),
            Buffer("col", col.ravel()),
            out("regs", 64 * count, np.uint32),
            out("back", 1, np.uint16),
        ],
    )
    got = result.outputs["regs"].reshape(2, 32, count)
    for block in range(2):
        for lane in range(32):
            for j in range(count):
                low, high = (_element(tile, row, col, block, j, *_where(lane, h, trans)) for h in (0, 1))
                assert got[block, lane, j] == low | (high << 16), (block, lane, j)
    assert result.findings == []  # the addresses of lanes past 8 x count are not used
    totals = result.counters.totals
    assert totals["shared_load_requests"] == 2 and totals["shared_load_values"] == 2 * 64 * count


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_writes_each_lanes_elements_where_the_isa_says(rng, count, trans):
    tile = rng.integers(0, 2**16, (2, ROWS * STRIDE)).astype(np.uint16)
    regs = rng.integers(0, 2**32, (2, 32, count), dtype=np.uint64).astype(np.uint32)
    row, col = _rows_and_columns(rng, count)
    result = launch(
        matrix_source("stmatrix", count, trans),
        "matrices",
        2,
        32,
        [
            Buffer("tile", tile.ravel()),
            Buffer("row", row.ravel()),
            Buffer("col", col.ravel()),
            Buffer("regs", regs.ravel()),
            out("back", 2 * ROWS * STRIDE, np.uint16),
        ],
    )
    expected = tile.copy()
    for block in range(2):
        for lane in range(32):
            for j in range(count):
                for h in (0, 1):
                    r, c = _where(lane, h, trans)
                    at = row[block, 8 * j + r] * STRIDE + col[block, 8 * j + r] + c
                    expected[block, at] = (regs[block, lane, j] >> (16 * h)) & 0xFFFF
    np.testing.assert_array_equal(result.outputs["back"].reshape(2, -1), expected)
    assert result.findings == []
    assert result.counters.totals["shared_store_values"] >= 2 * 64 * count


BAD_ROWS = r"""
#define STRIDE 24
__device__ unsigned row_address(const unsigned short* s, const int* row) {
    return (unsigned)__cvta_generic_to_shared(s) + 2 * row[threadIdx.x] * STRIDE;
}

// rows 16-31 of the tile are never written; row 32 is past its end
extern "C" __global__ void by_ldmatrix(const unsigned short* tile, const int* row, unsigned* sink) {
    __shared__ __align__(16) unsigned short s[32 * STRIDE];
    for (int i = threadIdx.x; i < 16 * STRIDE; i += 32) s[i] = tile[i];
    __syncthreads();
    unsigned r[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row_address(s, row)));
    sink[threadIdx.x] = r[0] ^ r[1] ^ r[2] ^ r[3];
}

extern "C" __global__ void by_ld_shared(const unsigned short* tile, const int* row, unsigned* sink) {
    __shared__ __align__(16) unsigned short s[32 * STRIDE];
    for (int i = threadIdx.x; i < 16 * STRIDE; i += 32) s[i] = tile[i];
    __syncthreads();
    unsigned r[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row_address(s, row)));
    sink[threadIdx.x] = r[0] ^ r[1] ^ r[2] ^ r[3];
}
"""


def test_ldmatrix_of_bad_rows_finds_what_ld_shared_finds(rng):
    """Each row is read by the lane that gives its address, exactly as that lane's 16-byte
    ld.shared would: the same findings (kind, thread, byte) for an unwritten row and a row
    past the end of the array."""
    row = rng.integers(0, 16, 32).astype(np.int32)
    row[5], row[9] = 20, 32
    tile = rng.integers(0, 2**16, 16 * 24).astype(np.uint16)

    def findings(kernel):
        args = [Buffer("tile", tile), Buffer("row", row), out("sink", 32, np.uint32)]
        result = launch(BAD_ROWS, kernel, 1, 32, args)
        return sorted(result.findings, key=lambda f: f.kind)

    matrix, plain = findings("by_ldmatrix"), findings("by_ld_shared")
    assert [f.kind for f in matrix] == ["out_of_bounds_read", "uninitialized_shared_read"]
    for a, b in zip(matrix, plain, strict=True):
        assert (a.kind, a.thread, a.block) == (b.kind, b.thread, b.block)
        if a.kind == "out_of_bounds_read":  # elements of 2 (ldmatrix) and 4 bytes (ld.v4.u32)
            assert 2 * a.index == 4 * b.index and 2 * a.bound == 4 * b.bound
    assert matrix[0].thread == (9, 0, 0) and matrix[1].thread == (5, 0, 0)


# ----- bf16 ---------------------------------------------------------------------------
BF16 = r"""
#include <cuda_bf16.h>
extern "C" __global__ void bf16_ops(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                                    __nv_bfloat16* o, int* compared, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = a[i], y = b[i], z = c[i];
    o[i] = __hadd(x, y);
    o[n + i] = __hsub(x, y);
    o[2 * n + i] = __hmul(x, y);
    o[3 * n + i] = __hfma(x, y, z);
    o[4 * n + i] = __hmin(x, y);
    o[5 * n + i] = __hmax(x, y);
    o[6 * n + i] = __hneg(x);
    o[7 * n + i] = __habs(x);
    compared[i] = (x < y) + 2 * __hisnan(x);
}

extern "C" __global__ void bf16_pairs(const __nv_bfloat162* a, const __nv_bfloat162* b,
                                      const __nv_bfloat162* c, __nv_bfloat162* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat162 x = a[i], y = b[i], z = c[i];
    o[i] = __hadd2(x, y);
    o[n + i] = __hsub2(x, y);
    o[2 * n + i] = __hmul2(x, y);
    o[3 * n + i] = __hfma2(x, y, z);
    o[4 * n + i] = __hmin2(x, y);
    o[5 * n + i] = __hmax2(x, y);
    o[6 * n + i] = __hlt2(x, y);
}

extern "C" __global__ void bf16_conversions(const float* f, const double* d, const int* k, __nv_bfloat16* o,
                                            __nv_bfloat162* pairs, float* back, int* rounded, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    o[i] = __float2bfloat16_rn(f[i]);
    o[n + i] = __float2bfloat16_rz(f[i]);
    o[2 * n + i] = __float2bfloat16_rd(f[i]);
    o[3 * n + i] = __float2bfloat16_ru(f[i]);
    o[4 * n + i] = __double2bfloat16(d[i]);
    o[5 * n + i] = __int2bfloat16_rn(k[i]);
    pairs[i] = __floats2bfloat162_rn(f[i], -f[i]);
    back[i] = __bfloat162float(o[i]);
    rounded[i] = __bfloat162int_rn(o[4 * n + i]);
}
"""


def _fused_trap(a, b, c):
    """Index 0: fma(3, 87, 2^-30) lies just above the tie 261 (between bf16 260 and 262):
    via an f32 sum it would round to 261, then to the even 260; exactly, it is 262."""
    a[0], b[0], c[0] = (bf16_reference(v)[0] for v in ([3.0], [87.0], [2.0**-30]))


def test_bf16_arithmetic_rounds_once_to_nearest_even(rng):
    n = 4096
    a, b, c = (random_bf16(rng, n) for _ in range(3))
    _fused_trap(a, b, c)
    a[1], b[1] = 0x7FC0, 0x3F80  # a NaN operand: min and max give the other one
    result = launch(
        BF16,
        "bf16_ops",
        n // 128,
        128,
        [
            Buffer("a", a),
            Buffer("b", b),
            Buffer("c", c),
            out("o", 8 * n, np.uint16),
            out("compared", n, np.int32),
            Scalar("n", n),
        ],
    )
    o = result.outputs["o"].reshape(8, n).astype(np.uint32)
    x, y, z = bf16_value(a), bf16_value(b), bf16_value(c)
    ok = np.arange(n) != 1
    exact = [x + y, x - y, x * y, x * y + z]  # exact in f64 for these magnitudes
    for k, value in enumerate(exact):
        np.testing.assert_array_equal(o[k][ok], bf16_reference(value[ok]), err_msg=f"operation {k}")
    assert o[3][0] == bf16_reference([262.0])[0]
    np.testing.assert_array_equal(o[4][ok], bf16_reference(np.minimum(x, y)[ok]))
    np.testing.assert_array_equal(o[5][ok], bf16_reference(np.maximum(x, y)[ok]))
    assert o[4][1] == o[5][1] == 0x3F80
    np.testing.assert_array_equal(o[6][ok], a[ok] ^ 0x8000)
    np.testing.assert_array_equal(o[7][ok], a[ok] & 0x7FFF)
    np.testing.assert_array_equal(result.outputs["compared"], (x < y) + 2 * np.isnan(x))


def test_bf16_pairs_work_on_each_half(rng):
    n = 1024
    a, b, c = (random_bf16(rng, 2 * n) for _ in range(3))
    result = launch(
        BF16,
        "bf16_pairs",
        n // 128,
        128,
        [Buffer("a", a), Buffer("b", b), Buffer("c", c), out("o", 14 * n, np.uint16), Scalar("n", n)],
    )
    o = result.outputs["o"].reshape(7, 2 * n).astype(np.uint32)
    x, y, z = bf16_value(a), bf16_value(b), bf16_value(c)
    for k, value in enumerate([x + y, x - y, x * y, x * y + z, np.minimum(x, y), np.maximum(x, y)]):
        np.testing.assert_array_equal(o[k], bf16_reference(value), err_msg=f"operation {k}")
    np.testing.assert_array_equal(o[6], np.where(x < y, 0x3F80, 0))
    assert result.counters.totals["flops"] == 2 * n * (1 + 1 + 1 + 2)  # add, sub, mul, fma on pairs


def test_bf16_conversions_round_as_asked(rng):
    n = 1024
    f = rng.standard_normal(n).astype(np.float32) * np.exp2(rng.integers(-20, 20, n)).astype(np.float32)
    f[:4] = [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 2.0**-130]  # two ties, a negative one, a subnormal
    d = f.astype(np.float64) * (1 + rng.uniform(-(2**-20), 2**-20, n))
    d[0] = 1 + 2**-8 + 2**-40  # just above a tie: through an f32 it would round down to 1
    k = rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32)
    result = launch(
        BF16,
        "bf16_conversions",
        n // 128,
        128,
        [
            Buffer("f", f),
            Buffer("d", d),
            Buffer("k", k),
            out("o", 6 * n, np.uint16),
            out("pairs", 2 * n, np.uint16),
            out("back", n),
            out("rounded", n, np.int32),
            Scalar("n", n),
        ],
    )
    o = result.outputs["o"].reshape(6, n).astype(np.uint32)
    for row, rounding in enumerate(("rn", "rz", "rm", "rp")):
        np.testing.assert_array_equal(o[row], bf16_reference(f, rounding), err_msg=rounding)
    np.testing.assert_array_equal(o[:, :2][0], [0x3F80, 0x3F82])  # ties to even
    np.testing.assert_array_equal(o[4], bf16_reference(d))
    assert o[4][0] == 0x3F81
    np.testing.assert_array_equal(o[5], bf16_reference(k.astype(np.float64)))
    pairs = result.outputs["pairs"].reshape(n, 2).astype(np.uint32)  # .x (low) = f, .y = -f
    np.testing.assert_array_equal(pairs[:, 0], o[0])
    np.testing.assert_array_equal(pairs[:, 1], bf16_reference(-f.astype(np.float64)))
    np.testing.assert_array_equal(result.outputs["back"], bf16_value(o[0]).astype(np.float32))
    np.testing.assert_array_equal(result.outputs["rounded"], np.rint(bf16_value(o[4])).astype(np.int32))
