"""Launch geometry: the special registers of three-dimensional grids and blocks, read by some lanes.

Each lane finds its slot from its block's and thread's linear indices (x fastest, as CUDA orders
them), writes there what a block-wide exchange through shared memory gave it (a barrier over the
whole three-dimensional block), and then, if its ``on`` flag is set, reads every register below
with ``asm volatile`` inside the branch (so that the compiler cannot read them once, with every
lane, before it) and stores each, and one value that carries every axis into the next. The
shapes are ragged (blocks of 35 and 27 threads end in partial warps) and the masks whole, every
third lane, and random."""

from __future__ import annotations

import numpy as np

REGISTERS = (
    "tid.x",
    "tid.y",
    "tid.z",
    "ntid.x",
    "ntid.y",
    "ntid.z",
    "ctaid.x",
    "ctaid.y",
    "ctaid.z",
    "nctaid.x",
    "nctaid.y",
    "nctaid.z",
    "laneid",
    "lanemask_lt",
    "lanemask_ge",
)
SHAPES = (  # (grid, block): x, y, z each
    ((3, 2, 2), (8, 4, 2)),
    ((2, 3, 5), (16, 2, 3)),
    ((4, 1, 1), (7, 5, 1)),
    ((2, 2, 2), (3, 3, 3)),
    ((1, 1, 3), (1, 1, 64)),
)
MASKS = ("every lane", "every third lane", "random")


def _reader(register: str) -> str:
    name = register.replace(".", "_")
    return (
        f"__device__ __forceinline__ unsigned read_{name}() {{ unsigned r; "
        f'asm volatile("mov.u32 %0, %%{register};" : "=r"(r)); return r; }}'
    )


KERNEL = r"""
extern "C" __global__ void geometry(const unsigned* on, unsigned* registers, unsigned* carried,
                                    unsigned* exchanged)
{
    __shared__ unsigned s[1024];
    unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned i = block * per_block + thread;
    s[thread] = i * 2654435761u;
    __syncthreads();
    exchanged[i] = s[(thread + 7u) % per_block];
    if (on[i]) {
        unsigned* mine = registers + COUNT * i;
STORES
        unsigned v = read_tid_z();
        v = v * 31u + read_tid_y();
        v = v * 31u + read_tid_x();
        v = v * 31u + read_ctaid_z();
        v = v * 31u + read_ctaid_y();
        v = v * 31u + read_ctaid_x();
        carried[i] = v;
    }
}
"""
STORES = "\n".join(f"        mine[{k}] = read_{r.replace('.', '_')}();" for k, r in enumerate(REGISTERS))
SOURCE = (
    "\n".join(_reader(r) for r in REGISTERS)
    + "\n"
    + KERNEL.replace("COUNT", str(len(REGISTERS))).replace("STORES", STORES)
)


def threads(grid: tuple[int, int, int], block: tuple[int, int, int]) -> int:
    return int(np.prod(grid)) * int(np.prod(block))


def mask(how: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if how == "every lane":
        return np.ones(n, np.uint32)
    if how == "every third lane":
        return (np.arange(n) % 3 == 0).astype(np.uint32)
    return (rng.random(n) < 0.5).astype(np.uint32)
