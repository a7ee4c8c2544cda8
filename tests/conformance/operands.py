"""Operand values for generated kernels: every type's edge values, paired exhaustively, then
random values drawn from the seed. Floats come as bits: zeros of both signs, infinities, quiet,
signalling and negative NaNs, the smallest and largest subnormals and normals, ties for every
rounding mode, and random bit patterns (every exponent); integers their extremes, their
neighbours, shift counts past the width and alternating bits."""

from __future__ import annotations

import numpy as np

DTYPES = {
    "u16": np.uint16,
    "s16": np.int16,
    "u32": np.uint32,
    "s32": np.int32,
    "u64": np.uint64,
    "s64": np.int64,
    "f16": np.uint16,  # as bits
    "f32": np.float32,
    "f64": np.float64,
    "f16x2": np.uint32,
    "bf16x2": np.uint32,
    "tf32": np.uint32,  # as bits (an f32 with its low 13 bits zero)
    "b32": np.uint32,
    "b64": np.uint64,
    "pred": np.uint32,  # 0 or 1 in memory
}

_F32_BITS = [
    0x00000000,
    0x80000000,
    0x3F800000,
    0xBF800000,
    0x3F000000,
    0x40200000,
    0x3FC00000,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0x7F800001,
    0xFFC00000,
    0x00000001,
    0x807FFFFF,
    0x00800000,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x3F800001,
    0x4B800000,
    0x4B000001,
    0x33800000,
    0x3EAAAAAB,
    0x40490FDB,
    0xC2F00000,
]  # 0, -0, 1, -1, 0.5, 2.5, 1.5, inf, -inf, qNaN, sNaN, -qNaN, min subnormal, -max subnormal,
#    min normal, max, -max, 1 + ulp, 2^24, 2^23 + 1, 2^-24 (a tie at 1), 1/3, pi, -120
_F64_BITS = [
    0x0000000000000000,
    0x8000000000000000,
    0x3FF0000000000000,
    0xBFF0000000000000,
    0x3FE0000000000000,
    0x4004000000000000,
    0x7FF0000000000000,
    0xFFF0000000000000,
    0x7FF8000000000000,
    0x7FF0000000000001,
    0x0000000000000001,
    0x800FFFFFFFFFFFFF,
    0x0010000000000000,
    0x7FEFFFFFFFFFFFFF,
    0x3FF0000000000001,
    0x3CA0000000000000,
    0x3FD5555555555555,
    0x4341000000000000,
    0x47EFFFFFE0000000,
    0x36A0000000000000,
]  # ..., 2^-53 (a tie at 1), 1/3, 2^53 * 1.0625, f32's max, f32's smallest subnormal
_F16_BITS = [
    0x0000,
    0x8000,
    0x3C00,
    0xBC00,
    0x7C00,
    0xFC00,
    0x7E00,
    0x0001,
    0x03FF,
    0x0400,
    0x7BFF,
    0x3C01,
    0x3555,
]


def _ints(bits: int, signed: bool) -> list[int]:
    top = 1 << bits
    values = [
        0,
        1,
        2,
        3,
        7,
        31,
        32,
        33,
        63,
        64,
        65535,
        65536,
        top - 1,
        top - 2,
        top >> 1,
        (top >> 1) - 1,
        (top >> 1) + 1,
        int("55" * (bits // 8), 16),
        int("AA" * (bits // 8), 16),
        int("0F" * (bits // 8), 16),
    ]
    values = [v % top for v in values]
    dtype = np.dtype(f"u{bits // 8}")
    array = np.array(values, dtype)
    return array.view(dtype.str.replace("u", "i")) if signed else array


def edges(kind: str) -> np.ndarray:
    """The edge values of a PTX type, as that type's numpy dtype."""
    if kind == "f32":
        return np.array(_F32_BITS, np.uint32).view(np.float32)
    if kind == "f64":
        return np.array(_F64_BITS, np.uint64).view(np.float64)
    if kind == "f16":
        return np.array(_F16_BITS, np.uint16)
    if kind in ("f16x2", "bf16x2"):
        halves = np.array(_F16_BITS if kind == "f16x2" else [b >> 16 for b in _F32_BITS], np.uint32)
        return (halves[:, None] << 16 | halves[None, :]).ravel()[:: max(1, halves.size // 4)]
    if kind == "pred":
        return np.array([0, 1], np.uint32)
    width = int(kind[1:])
    return _ints(width, kind[0] == "s")


def random_values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` values of ``kind``: for floats half random bits (every exponent, NaNs and
    subnormals included), half ordinary magnitudes near one another (so that sums round)."""
    dtype = np.dtype(DTYPES[kind])
    if kind == "pred":
        return rng.integers(0, 2, n, dtype=np.uint32)
    bits = rng.integers(0, 1 << 63, n, dtype=np.uint64, endpoint=True)
    raw = bits.astype(f"u{dtype.itemsize}").view(dtype) if dtype.itemsize < 8 else bits.view(dtype)
    if dtype.kind != "f":
        small = rng.integers(-300, 300, n).astype(dtype)
        return np.where(rng.random(n) < 0.5, raw, small)
    ordinary = (rng.standard_normal(n) * 2.0 ** rng.integers(-12, 12, n)).astype(dtype)
    return np.where(rng.random(n) < 0.5, raw, ordinary)


def lanes(kinds: list[str], n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``n`` lanes of operands, one array per source: the edge values of the first two sources
    paired exhaustively (as many pairs as fit in half the lanes), random values after."""
    columns = [random_values(k, n, rng) for k in kinds]
    if not kinds:
        return columns
    first = edges(kinds[0])
    second = edges(kinds[1]) if len(kinds) > 1 else np.zeros(1, np.uint8)
    pairs = min(first.size * second.size, n // 2)
    a_index, b_index = np.divmod(np.arange(pairs), second.size)
    columns[0][:pairs] = first[a_index % first.size]
    if len(kinds) > 1:
        columns[1][:pairs] = second[b_index]
    for k in range(2, len(kinds)):  # third sources: edge values in turn
        third = edges(kinds[k])
        columns[k][:pairs] = third[np.arange(pairs) % third.size]
    return columns
