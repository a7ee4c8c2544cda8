"""The conformance suite: modules of generated kernels, each launch with its inputs, and how its
outputs are compared with the H200's (recorded in ``golden/``).

A module is one CUDA source holding many kernels, compiled once (PTX for the emulator, an sm_90
cubin for the GPU, from one NVRTC). A case is one launch of one kernel. Outputs start poisoned
(every byte 0xCD), so a lane that writes nothing shows it. Comparison is bit for bit; the only
exceptions are named where a case is made: an approximate instruction's ulps (the ISA's bound),
lanes whose result the ISA leaves undefined (a shuffle from an inactive lane), and NaN payloads
(``same_bits``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from . import addresses, alu, atomics, geometry, kernels, programs, tiles, warps
from .operands import DTYPES, lanes

SEED = 20261202  # the suite's inputs; golden/ holds the H200's outputs for them
POISON = 0xCD
LANES = 512  # two blocks of 256: both blocks of one chunk, and a warp layout with mixed warps
BLOCK = 256


@dataclass(frozen=True)
class Output:
    name: str
    dtype: str
    size: int
    defined: np.ndarray | None = None  # where the ISA defines the result (None: everywhere)
    floats: str | None = None  # integers that hold floats ("f16", "f16x2", "bf16x2", "tf32"): NaNs alike


@dataclass(frozen=True)
class Case:
    name: str  # unique in the suite: "<instruction or program>/<way>"
    kernel: str
    grid: int | tuple[int, int, int]  # blocks along x (or x, y, z)
    block: int | tuple[int, int, int]  # threads along x (or x, y, z)
    inputs: tuple[tuple[str, np.ndarray], ...]  # in argument order, before the outputs
    outputs: tuple[Output, ...]
    tolerance: str = ""  # an approximate instruction's allowance (``within``)
    shared_bytes: int = 0
    words: np.ndarray | None = None  # the first output's contents before the launch (else poison)


@dataclass(frozen=True)
class Module:
    name: str
    source: str
    cases: tuple[Case, ...] = field(default=())

    def digest(self) -> str:
        """Of everything that decides what the GPU computed: the source and every input."""
        h = hashlib.sha256(self.source.encode())
        for case in self.cases:
            h.update(f"{case.name} {case.kernel} {case.grid} {case.block} {case.shared_bytes}".encode())
            for name, array in (
                *case.inputs,
                ("words", case.words if case.words is not None else np.zeros(0)),
            ):
                h.update(name.encode() + array.dtype.str.encode() + np.ascontiguousarray(array).tobytes())
        return h.hexdigest()


def dims(extent: int | tuple[int, int, int]) -> tuple[int, int, int]:
    """A case's grid or block as (x, y, z)."""
    return (extent, 1, 1) if isinstance(extent, int) else tuple(extent)


def initial(case: Case, output: Output) -> np.ndarray:
    """An output's contents before the launch: the case's words, else poison."""
    if case.words is not None and output is case.outputs[0]:
        return case.words.copy()
    return np.full(output.size * np.dtype(output.dtype).itemsize, POISON, np.uint8).view(output.dtype)


def instruction_modules(seed: int, per_module: int = 40) -> list[Module]:
    """Every instruction of ``alu.INSTRUCTIONS``, each in every way, ``per_module`` instructions
    to a module (a module compiles in a second or two)."""
    rng = np.random.default_rng(seed)
    modules = []
    table = alu.INSTRUCTIONS
    for start in range(0, len(table), per_module):
        sources, cases = [], []
        for k, ins in enumerate(table[start : start + per_module], start):
            operands = _operands(ins, rng)
            for way in kernels.WAYS:
                if way == "aliased" and kernels.aliased_source(ins) is None:
                    continue
                written = kernels.kernel(f"i{k}_{way}", ins, way)
                sources.append(written.source)
                cases.append(_instruction_case(ins, way, written, operands))
        modules.append(Module(f"instructions{start // per_module:02d}", "\n".join(sources), tuple(cases)))
    return modules


def _operands(ins: alu.Instruction, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each source's lanes by role, and ``on``: the lanes of the diverged way."""
    values = lanes([o.kind for o in ins.sources], LANES, rng)
    columns = {o.role: v.astype(DTYPES[o.kind]) for o, v in zip(ins.sources, values, strict=True)}
    if "q" in columns:
        columns["q"] &= 1
    on = (rng.random(LANES) < 0.5).astype(np.uint32)
    on[:32], on[32:64] = 1, 0  # a whole warp on, a whole warp off, the rest mixed
    columns["on"] = on
    return columns


def _instruction_case(ins, way: str, written: kernels.Written, operands: dict) -> Case:
    inputs = (*((f"{o.role}_in", operands[o.role]) for o in written.inputs), ("on", operands["on"]))
    outputs = tuple(
        Output(
            f"{o.role}_out", np.dtype(DTYPES[o.kind]).str, LANES, floats=o.kind if o.kind in HELD else None
        )
        for o in written.outputs
    )
    return Case(f"{ins.text}/{way}", written.name, LANES // BLOCK, BLOCK, inputs, outputs, ins.tolerance)


# ----- comparison ------------------------------------------------------------------------
HELD = {"f16": 1, "f16x2": 2, "bf16x2": 2, "tf32": 1}  # floats held in integers: halves per element


def same_bits(emulated: np.ndarray, native: np.ndarray, floats: str | None = None) -> np.ndarray:
    """Element by element: the same bits, or both NaN (an H200 gives its canonical NaN where
    numpy keeps an operand's payload: a kernel sees the difference only through bit casts)."""
    width = emulated.dtype.itemsize
    same = emulated.view(f"u{width}") == native.view(f"u{width}")
    if emulated.dtype.kind == "f":
        same |= np.isnan(emulated) & np.isnan(native)
    elif floats is not None:
        e, g = _as_floats(emulated, floats), _as_floats(native, floats)
        alike = (e == g) | (np.isnan(e) & np.isnan(g))
        same |= alike.reshape(emulated.size, -1).all(axis=1)
    return same


def _as_floats(bits: np.ndarray, floats: str) -> np.ndarray:
    """The floats an integer array holds (one column per half of a pair)."""
    if floats == "tf32":
        return bits.astype(np.uint32).view(np.float32)
    halves = bits.astype(np.uint32)[:, None] >> np.array([0, 16], np.uint32)[: HELD[floats]]
    halves = halves & np.uint32(0xFFFF)
    if floats == "bf16x2":
        return (halves << np.uint32(16)).view(np.float32)
    return halves.astype(np.uint16).view(np.float16)


def within(case: Case, emulated: np.ndarray, native: np.ndarray) -> np.ndarray:
    """Lanes an approximate instruction is not checked on, or where the GPU's answer lies within
    the ISA's allowance of the emulator's (exact) one. Checked: finite operands (within [-pi, pi]
    where the bound says so) giving normal results on both."""
    kind, _, domain = case.tolerance.partition(":")
    bound = 2.0 ** -int(kind[1:])
    operands = [a for name, a in case.inputs if name.endswith("_in")]
    e, g = emulated.astype(np.float64), native.astype(np.float64)
    tiny = np.finfo(emulated.dtype).tiny
    checked = np.logical_and.reduce([np.isfinite(a) for a in operands])
    checked &= np.isfinite(e) & np.isfinite(g) & (np.abs(e) >= tiny) & (np.abs(g) >= tiny)
    if domain == "pi":
        checked &= np.abs(operands[0]) <= np.pi
    scale = np.abs(e) if kind[0] == "r" else np.maximum(1.0, np.abs(e))
    with np.errstate(invalid="ignore", over="ignore"):
        return ~checked | (np.abs(e - g) <= bound * scale)


def mismatches(case: Case, emulated: dict[str, np.ndarray], native: dict[str, np.ndarray]) -> list[str]:
    """What differs, one line per output (empty: the emulator agrees with the GPU)."""
    lines = []
    for out in case.outputs:
        e, g = np.asarray(emulated[out.name]), np.asarray(native[out.name])
        bad = ~same_bits(e, g, out.floats)
        if case.tolerance:
            bad &= ~within(case, e, g)
        if out.defined is not None:
            bad &= out.defined
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            lines.append(
                f"{case.name}: {out.name}[{first}] emulator {_show(e[first])} GPU {_show(g[first])}"
                f" ({int(bad.sum())} of {bad.size} lanes; inputs {_inputs_at(case, first)})"
            )
    return lines


def _show(value) -> str:
    v = np.asarray(value)
    return f"{v!r} (0x{int(v.view(f'u{v.dtype.itemsize}')):0{2 * v.dtype.itemsize}x})"


def _inputs_at(case: Case, lane: int) -> str:
    return ", ".join(f"{name}={_show(a[lane])}" for name, a in case.inputs if a.size > lane)


def manifest(modules: list[Module]) -> str:
    """What the device script needs to launch every case, as JSON."""
    return json.dumps(
        [
            {
                "module": m.name,
                "cases": [
                    {
                        "name": c.name,
                        "kernel": c.kernel,
                        "grid": c.grid,
                        "block": c.block,
                        "shared_bytes": c.shared_bytes,
                        "inputs": [n for n, _ in c.inputs],
                        "outputs": [[o.name, o.dtype, o.size] for o in c.outputs],
                    }
                    for c in m.cases
                ],
            }
            for m in modules
        ]
    )


# ----- the other modules ---------------------------------------------------------------------
def warp_module(seed: int) -> Module:
    rng = np.random.default_rng(seed)
    lanes_of = warps.participation(rng)
    masks = warps.member_masks(lanes_of)
    n = masks.size
    taking = masks != 0
    who = tuple((name, lanes_of[name]) for name in ("gone", "on", "label"))
    v = lanes(["u32"], n, rng)[0].astype(np.uint32)
    cases = []
    for mode in warps.SHUFFLES:
        b = rng.integers(0, 40, n).astype(np.uint32)
        widths = rng.choice([32, 16, 8, 4, 2], n // 32).repeat(32).astype(np.uint32)
        c = ((32 - widths) << 8) | (0 if mode == "up" else 31)
        c = np.where(np.repeat(rng.random(n // 32) < 0.25, 32), rng.integers(0, 1 << 13, n), c).astype(
            np.uint32
        )
        defined = warps.shfl_defined(mode, b, c, masks)
        outputs = (Output("d", "<u4", n, defined), Output("p", "<u4", n, taking))
        cases.append(
            Case(
                f"shfl.sync.{mode}",
                f"shfl_{mode}",
                n // BLOCK,
                BLOCK,
                (*who, ("v", v), ("b", b), ("c", c)),
                outputs,
            )
        )
    for kernel, names in (
        ("votes", ("all", "any", "uni", "ballot", "active")),
        ("reductions", ("add", "umin", "umax", "smin", "smax", "band", "bor", "bxor")),
        ("matches", ("any32", "all32", "pred32", "any64", "all64")),
        ("groups", ("sum", "part_rank", "part_size", "tile_sum", "tile_shfl")),
    ):
        outputs = tuple(
            Output(name, "<i4" if name.startswith(("s", "part", "tile_sum")) else "<u4", n) for name in names
        )
        cases.append(Case(kernel, kernel, n // BLOCK, BLOCK, (*who, ("v", v)), outputs))
    return Module("warps", warps.SOURCE, tuple(cases))


def atomic_module(seed: int) -> Module:
    rng = np.random.default_rng(seed)
    cases = []
    for name, ctype, _update in atomics.OPERATIONS:
        dtype = np.dtype(atomics.NUMPY[ctype]).str
        for space in ("global", "shared"):
            for shared_words in (False, True):
                if shared_words and name not in atomics.ORDER_FREE:
                    continue
                index, values, words = atomics.operands(name, ctype, shared_words, LANES, rng)
                per_block = atomics.WORDS if shared_words else BLOCK
                if space == "shared" and shared_words:  # a block's shared words are its own
                    index = index + np.arange(LANES) // BLOCK * per_block
                    words = np.concatenate([words] * (LANES // BLOCK))
                size = np.array([per_block], np.uint32)
                for returns in (True, False):
                    kernel = atomics.kernel_name(name, space, returns)
                    held = {"__half2": "f16x2", "__nv_bfloat162": "bf16x2"}.get(ctype)
                    outputs = (Output("words", dtype, words.size, floats=held),)
                    if returns and not shared_words:
                        outputs += (Output("old", dtype, LANES, floats=held),)
                    elif returns:
                        continue  # the old values of shared words depend on the order
                    inputs = (("index", index.astype(np.uint32)), ("values", values), ("size", size))
                    shape = "own words" if not shared_words else f"{atomics.WORDS} words"
                    cases.append(
                        Case(
                            f"{kernel} ({shape})",
                            kernel,
                            LANES // BLOCK,
                            BLOCK,
                            inputs,
                            outputs,
                            shared_bytes=per_block * np.dtype(dtype).itemsize,
                            words=words,
                        )
                    )
    return Module("atomics", atomics.SOURCE, tuple(cases))


def program_modules(seed: int, count: int = 48, per_module: int = 16) -> list[Module]:
    rng = np.random.default_rng(seed)
    modules = []
    for first in range(0, count, per_module):
        names = [f"program{k:03d}" for k in range(first, first + per_module)]
        source = "\n".join(programs.program(name, rng) for name in names)
        cases = []
        size = programs.GRID * programs.BLOCK * programs.VARIABLES
        for name in names:
            xi, xf = programs.inputs(rng)
            outputs = (Output("yi", "<u4", size), Output("yf", "<f4", size))
            cases.append(Case(name, name, programs.GRID, programs.BLOCK, (("xi", xi), ("xf", xf)), outputs))
        modules.append(Module(f"programs{first // per_module}", source, tuple(cases)))
    return modules


def tile_module(seed: int) -> Module:
    values = tiles.operands(LANES, np.random.default_rng(seed))
    inputs = tuple((name, values[name]) for name in ("a", "b", "c", "on"))
    out = (Output("d", "<f4", LANES * tiles.V * tiles.V),)
    ways = ("converged", "diverged")
    cases = tuple(
        Case(f"register tile/{way}", f"tile_{way}", LANES // BLOCK, BLOCK, inputs, out) for way in ways
    )
    return Module("tiles", tiles.SOURCE, cases)


def geometry_module(seed: int) -> Module:
    rng = np.random.default_rng(seed)
    cases = []
    for grid, block in geometry.SHAPES:
        n = geometry.threads(grid, block)
        for how in geometry.MASKS:
            outputs = (
                Output("registers", "<u4", n * len(geometry.REGISTERS)),
                Output("carried", "<u4", n),
                Output("exchanged", "<u4", n),
            )
            on = ("on", geometry.mask(how, n, rng))
            cases.append(Case(f"geometry {grid}x{block}/{how}", "geometry", grid, block, (on,), outputs))
    return Module("geometry", geometry.SOURCE, tuple(cases))


def address_module(seed: int) -> Module:
    rng = np.random.default_rng(seed)
    cases = []
    for blocks, threads in addresses.SHAPES:
        n = blocks * threads
        x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        for how in geometry.MASKS:
            inputs = (("on", geometry.mask(how, n, rng)), ("x", x))
            outputs = (Output("loaded", "<u4", n * addresses.LOADS), Output("stored", "<u4", n))
            name = f"shared [%r+offset] {blocks}x{threads}/{how}"
            cases.append(Case(name, "shared_offsets", blocks, threads, inputs, outputs))
    return Module("addresses", addresses.SOURCE, tuple(cases))


def all_modules(seed: int = SEED) -> list[Module]:
    return [
        *instruction_modules(seed),
        warp_module(seed + 1),
        atomic_module(seed + 2),
        *program_modules(seed + 3),
        tile_module(seed + 4),
        geometry_module(seed + 5),
        address_module(seed + 6),
    ]
