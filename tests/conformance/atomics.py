"""Atomics and reductions on every type and space. Two shapes of launch: every lane on a word
of its own (the returned old value and the new one are both exact), and 512 lanes on 7 words
(only the final words are compared, for operations whose result no order changes: integer
add, min, max, and, or, xor, inc and dec with one limit, and float adds of small integers,
which are exact in any order). Each in global memory and in shared memory (staged in, updated,
written back after a barrier)."""

from __future__ import annotations

import numpy as np

WORDS = 7  # the words many lanes share
BLOCK = 256

# (name, C type, expression updating *w with x (and y), returning the old value or not)
OPERATIONS = [
    ("add_u32", "unsigned", "atomicAdd(w, x)"),
    ("add_s32", "int", "atomicAdd(w, x)"),
    ("add_u64", "unsigned long long", "atomicAdd(w, x)"),
    ("add_f32", "float", "atomicAdd(w, x)"),
    ("add_f64", "double", "atomicAdd(w, x)"),
    ("min_s32", "int", "atomicMin(w, x)"),
    ("max_s32", "int", "atomicMax(w, x)"),
    ("min_u32", "unsigned", "atomicMin(w, x)"),
    ("max_u32", "unsigned", "atomicMax(w, x)"),
    ("min_s64", "long long", "atomicMin(w, x)"),
    ("max_u64", "unsigned long long", "atomicMax(w, x)"),
    ("and_u32", "unsigned", "atomicAnd(w, x)"),
    ("or_u32", "unsigned", "atomicOr(w, x)"),
    ("xor_u64", "unsigned long long", "atomicXor(w, x)"),
    ("inc_u32", "unsigned", "atomicInc(w, 5u)"),
    ("dec_u32", "unsigned", "atomicDec(w, 5u)"),
    ("exch_u32", "unsigned", "atomicExch(w, x)"),
    ("exch_f32", "float", "atomicExch(w, x)"),
    ("cas_u32", "unsigned", "atomicCAS(w, x & 3u, x)"),
    ("cas_u64", "unsigned long long", "atomicCAS(w, x & 3ull, x)"),
    ("add_f16x2", "__half2", "atomicAdd(w, x)"),
    ("add_bf16x2", "__nv_bfloat162", "atomicAdd(w, x)"),
]
ORDER_FREE = {
    "add_u32",
    "add_s32",
    "add_u64",
    "add_f32",
    "add_f64",
    "min_s32",
    "max_s32",
    "min_u32",
    "max_u32",
    "min_s64",
    "max_u64",
    "and_u32",
    "or_u32",
    "xor_u64",
    "inc_u32",
    "dec_u32",
}
NUMPY = {
    "unsigned": "u4",
    "int": "i4",
    "unsigned long long": "u8",
    "long long": "i8",
    "float": "f4",
    "double": "f8",
    "__half2": "u4",
    "__nv_bfloat162": "u4",
}


def kernel_name(name: str, space: str, returns: bool) -> str:
    return f"atom_{name}_{space}_{'old' if returns else 'red'}"


def _kernel(name: str, ctype: str, update: str, space: str, returns: bool) -> str:
    kernel = kernel_name(name, space, returns)
    result = "old[t] = " if returns else ""
    if space == "global":
        body = f"{ctype}* w = &words[index[t]]; const {ctype} x = values[t]; {result}{update};"
    else:
        body = (
            f"extern __shared__ unsigned char raw[]; {ctype}* staged = ({ctype}*)raw;\n"
            f"    for (unsigned i = threadIdx.x; i < n; i += blockDim.x)\n"
            f"        staged[i] = words[blockIdx.x * n + i];\n"
            f"    __syncthreads();\n"
            f"    {{ {ctype}* w = &staged[index[t] - blockIdx.x * n];\n"
            f"      const {ctype} x = values[t]; {result}{update}; }}\n"
            f"    __syncthreads();\n"
            f"    for (unsigned i = threadIdx.x; i < n; i += blockDim.x)\n"
            f"        words[blockIdx.x * n + i] = staged[i];"
        )
    old = f", {ctype}* old" if returns else ""
    return (
        f'extern "C" __global__ void {kernel}(const unsigned* index, const {ctype}* values,\n'
        f"        const unsigned* size, {ctype}* words{old}) {{\n"
        f"    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    const unsigned n = size[0];\n    {body}\n}}\n"
    )


SOURCE = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + "".join(
    _kernel(name, ctype, update, space, returns)
    for name, ctype, update in OPERATIONS
    for space in ("global", "shared")
    for returns in (True, False)
)


def operands(name: str, ctype: str, shared_words: bool, lanes: int, rng: np.random.Generator):
    """(index, values, initial words) for one operation: every lane on its own word, or all of a
    block's lanes on ``WORDS`` words (global: the launch's; shared: the block's)."""
    dtype = np.dtype(NUMPY[ctype])
    if shared_words:
        index = rng.integers(0, WORDS, lanes).astype(np.uint32)
        small = name.startswith("add_f")  # small integers: a float sum exact in any order
        values = rng.integers(-8, 9, lanes).astype(dtype) if small else _random(dtype, lanes, rng)
        words = (
            rng.integers(0, 9, WORDS).astype(dtype)
            if small or name[:3] in ("inc", "dec")
            else _random(dtype, WORDS, rng)
        )
        return index, values, words
    blocks = lanes // BLOCK  # each block on its own words, every lane on one of them
    index = np.concatenate([rng.permutation(BLOCK) + b * BLOCK for b in range(blocks)]).astype(np.uint32)
    words = _random(dtype, lanes, rng)
    if name[:3] in ("inc", "dec"):
        words = rng.integers(0, 8, lanes).astype(dtype)
    if name.startswith("cas"):  # half the lanes find what they compare with
        values = _random(dtype, lanes, rng)
        words = np.where(rng.random(lanes) < 0.5, values & 3, words).astype(dtype)
        return index, values, words
    return index, _random(dtype, lanes, rng), words


def _random(dtype: np.dtype, n: int, rng: np.random.Generator) -> np.ndarray:
    bits = rng.integers(0, 1 << 63, n, dtype=np.uint64, endpoint=True)
    values = bits.astype(f"u{dtype.itemsize}").view(dtype)
    if dtype.kind == "f":  # ordinary magnitudes half the time
        ordinary = (rng.standard_normal(n) * 100).astype(dtype)
        values = np.where(rng.random(n) < 0.5, values, ordinary)
    return values
