"""Every memory opcode the emulator implements, in every state space, counted where its
address really lies or refused as a GPU refuses it (the rule: ``counters.py``'s docstring).

The opcodes come from the op table itself: every opcode whose executor is built by the
memory modules (``access.py``, ``wmma.py``, ``mma.py``) must have its forms below, and every other
opcode that is not pure register arithmetic must be listed as touching no memory, so a
memory opcode added without a count fails here. Each form is one inline-PTX instruction
on its own line of a one-warp kernel, whose per-line counters are compared exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from autograder.backends.compiler import PtxasRefusal
from autograder.contract import Buffer
from autograder.emulator import access, mma, wmma
from autograder.emulator.ops import OPS, PURE_OPS

from .helpers import launch, line_of, out

# one warp, each lane one 4-byte word: what an ld or st of it counts, in each space
GLOBAL = {"requests": 1, "values": 32, "bytes": 128, "sectors": 4}
SHARED = {"requests": 1, "values": 32, "bytes": 128, "wavefronts": 1, "conflicts": 0}


def counts(space: str, kind: str, events: dict) -> dict:
    return {f"{space}_{kind}_{what}": n for what, n in events.items()}


GLOBAL_LOAD, GLOBAL_STORE = counts("global", "load", GLOBAL), counts("global", "store", GLOBAL)
SHARED_LOAD, SHARED_STORE = counts("shared", "load", SHARED), counts("shared", "store", SHARED)
NOTHING: dict = {}  # local memory, the constant cache: no counter

# opcodes that are neither pure register arithmetic nor memory, and why they move no data
NOT_MEMORY = {
    "shfl": "lanes' registers",
    "vote": "lanes' predicates",
    "activemask": "the active mask",
    "redux": "lanes' registers",
    "mma": "lanes' registers (mma.sync; its module's ldmatrix and stmatrix are memory)",
    "match": "lanes' registers",
    "bar": "a barrier",
    "barrier": "a barrier",
    "call": "printf and assert (they read their strings for the report, never into registers)",
    "trap": "an abort",
    "bra": "a branch",
    "brx": "a branch",
}


def memory_opcodes() -> set[str]:
    modules = {access.__name__, wmma.__name__, mma.__name__}
    return {op for op, build in OPS.items() if build.__module__ in modules and op not in NOT_MEMORY}


@dataclass(frozen=True)
class Form:
    op: str
    space: str  # the instruction's state space (generic: none), "->" for a copy
    asm: str  # operands: %0 v (in/out), %1 global pointer, %2 generic pointer to shared,
    # %3 shared address, %4 generic pointer to local, %5 generic pointer to a __constant__, %6 w, %7 z
    expected: dict  # the probe line's traffic counters; None: refused (a bounds finding)
    reaches: str = ""  # where the address points when not where the space says
    ptxas: str = ""  # ptxas refuses it for sm_90 (as a GPU's compile would): the error it gives

    @property
    def id(self) -> str:
        return f"{self.op}.{self.space}" + (f"@{self.reaches}" if self.reaches else "")


# what ptxas says of a form it refuses for sm_90: the student's compile error on the probe line
READ_ONLY = "State space incorrect for instruction 'st'"  # the constant space is read-only
PTXAS_CRASHES = "ptxas, NVIDIA's assembler, crashed on this kernel (signal 11, SIGSEGV)"
TO_LOCAL = "{.reg .u64 %%a; cvta.to.local.u64 %%a, %4; "
TO_CONST = "{.reg .u64 %%a; cvta.to.const.u64 %%a, %5; "

LOADS = [
    Form("ld", "global", "ld.global.u32 %0, [%1];", GLOBAL_LOAD),
    Form("ld", "global", "ld.global.nc.u32 %0, [%1];", GLOBAL_LOAD, "nc"),
    Form("ld", "generic", "ld.u32 %0, [%1];", GLOBAL_LOAD, "global"),
    Form("ld", "generic", "ld.u32 %0, [%2];", SHARED_LOAD, "shared"),
    Form("ld", "generic", "ld.u32 %0, [%4];", NOTHING, "local"),
    Form("ld", "generic", "ld.u32 %0, [%5];", GLOBAL_LOAD, "constant"),  # a global load on a GPU too
    Form("ld", "shared", "ld.shared.u32 %0, [%3];", SHARED_LOAD),
    Form("ld", "local", TO_LOCAL + "ld.local.u32 %0, [%%a];}", NOTHING),
    Form("ld", "const", TO_CONST + "ld.const.u32 %0, [%%a];}", NOTHING),
    Form("ld", "param", "ld.param.u32 %0, [%1];", None, "global"),
    Form("ld", "const", "ld.const.u32 %0, [%1];", None, "global"),
    Form("ld", "shared", "ld.shared.u32 %0, [%1];", None, "global"),
    Form("ld", "local", "ld.local.u32 %0, [%1];", None, "global"),
    Form("ld", "global", "ld.global.u32 %0, [%2];", None, "shared"),
    Form("ldu", "global", "ldu.global.u32 %0, [%1];", GLOBAL_LOAD),
    Form("ldu", "generic", "ldu.u32 %0, [%1];", GLOBAL_LOAD, "global"),
]
STORES = [
    Form("st", "global", "st.global.u32 [%1], %6;", GLOBAL_STORE),
    Form("st", "generic", "st.u32 [%1], %6;", GLOBAL_STORE, "global"),
    Form("st", "generic", "st.u32 [%2], %6;", SHARED_STORE, "shared"),
    Form("st", "generic", "st.u32 [%4], %6;", NOTHING, "local"),
    Form("st", "shared", "st.shared.u32 [%3], %6;", SHARED_STORE),
    Form("st", "local", TO_LOCAL + "st.local.u32 [%%a], %6;}", NOTHING),
    Form("st", "const", TO_CONST + "st.const.u32 [%%a], %6;}", None, ptxas=READ_ONLY),
    Form("st", "generic", "st.u32 [%5], %6;", None, "constant"),  # __constant__: read-only
    Form("st", "param", "st.param.u32 [%1], %6;", None, "global", PTXAS_CRASHES),
    Form("st", "const", "st.const.u32 [%1], %6;", None, "global", READ_ONLY),
    Form("st", "shared", "st.shared.u32 [%1], %6;", None, "global"),
    Form("st", "local", "st.local.u32 [%1], %6;", None, "global"),
]
# an atomic reads and writes its word: a load and a store of its width
ATOMIC_SPACES = {
    "global": ("%1", GLOBAL_LOAD | GLOBAL_STORE, ""),
    "shared": ("%3", SHARED_LOAD | SHARED_STORE, ""),
    "generic": ("%1", GLOBAL_LOAD | GLOBAL_STORE, "global"),
    "generic ": ("%2", SHARED_LOAD | SHARED_STORE, "shared"),
}
NO_RED = ("cas", "exch")  # PTX's red has neither (it returns nothing)


def _atomic_type(op: str) -> str:
    return "b32" if op in ("and", "or", "xor", "exch", "cas") else "u32"


def _atomic(op: str, kind: str, space: str) -> Form:
    addr, expected, reaches = ATOMIC_SPACES[space]
    dotted = "" if space.startswith("generic") else f".{space}"
    name = f"{kind}{dotted}.{op}.{_atomic_type(op)}"
    if kind == "red":
        text = f"{name} [{addr}], %6;"
    elif op == "cas":
        text = f"{name} %0, [{addr}], %7, %6;"
    else:
        text = f"{name} %0, [{addr}], %6;"
    return Form(kind, space.strip(), text, expected, reaches)


ATOMICS = [
    _atomic(op, kind, space)
    for kind in ("atom", "red")
    for op in access.ATOM_OPS
    if not (kind == "red" and op in NO_RED)
    for space in ATOMIC_SPACES
]
COPIES = [
    Form(
        "cp",
        "global->shared",
        "cp.async.ca.shared.global [%3], [%1], 4; cp.async.commit_group; cp.async.wait_all;",
        GLOBAL_LOAD | SHARED_STORE,
    )
]
FORMS = LOADS + STORES + ATOMICS + COPIES

PROBE = r"""
__constant__ unsigned table[32];
extern "C" __global__ void probe(unsigned* x, unsigned* y) {
    __shared__ unsigned s[32];
    volatile unsigned spill[32];
    unsigned t = threadIdx.x;
    s[t] = t;
    spill[(t * 7) & 31] = t;
    __syncthreads();
    unsigned* global_ptr = x + t;
    unsigned* shared_ptr = s + t;
    unsigned shared_addr = (unsigned)__cvta_generic_to_shared(shared_ptr);
    volatile unsigned* local_ptr = spill + t;
    const unsigned* const_ptr = table + t;
    unsigned v = t, w = 1u, z = 0u;
    asm volatile(FORM  // probe
                 : "+r"(v) : "l"(global_ptr), "l"(shared_ptr), "r"(shared_addr), "l"(local_ptr),
                 "l"(const_ptr), "r"(w), "r"(z) : "memory");
    __syncthreads();
    y[t] = v + s[t];
}
"""


def _traffic(row: dict) -> dict:
    return {name: n for name, n in row.items() if name.startswith(("global_", "shared_")) and n}


def _run(source: str, kernel: str):
    x = np.arange(1, 33, dtype=np.uint32)
    return launch(source, kernel, 1, 32, [Buffer("x", x), out("y", 32, np.uint32)])


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f"{f.id}:{f.asm}")
def test_each_memory_instruction_is_counted_where_it_reaches_or_refused(form):
    source = PROBE.replace("FORM", '"' + form.asm.replace('"', r"\"") + '"')
    line = line_of(source, "// probe")
    if form.ptxas:
        with pytest.raises(PtxasRefusal) as refused:
            _run(source, "probe")
        assert refused.value.log.startswith(f"kernel.cu({line}): error: {form.ptxas}")
        return
    result = _run(source, "probe")
    here = [f for f in result.findings if f.line == line]
    if form.expected is None:
        assert [f.kind for f in here] == ["out_of_bounds_write" if form.op == "st" else "out_of_bounds_read"]
        return
    assert result.findings == [], [f.message for f in result.findings]
    row = result.counters.by_line.get(line, {})
    expected = {name: n for name, n in form.expected.items() if n}
    assert _traffic(row) == expected


WMMA = r"""
#include <mma.h>
extern "C" __global__ void tile(unsigned* x, unsigned* y) {
    __shared__ __align__(32) unsigned s[256];
    unsigned t = threadIdx.x;
    for (int k = t; k < 256; k += 32) s[k] = x[k];
    __syncthreads();
    unsigned* global_ptr = x;
    unsigned* shared_ptr = s;
    unsigned shared_addr = (unsigned)__cvta_generic_to_shared(shared_ptr);
    unsigned r[8] = {};
    asm volatile(FORM  // probe
                 : OPERANDS "l"(global_ptr), "l"(shared_ptr), "r"(shared_addr) : "memory");
    __syncthreads();
    for (int k = 0; k < 8; ++k) y[8 * t + k] = r[k] + s[8 * t + k];
}
"""
WMMA_ADDRESS = {"global": "%8", "shared": "%10", "generic": "%8", "generic ": "%9"}


def _fragment(constraint: str) -> str:
    return ", ".join(f'"{constraint}"(r[{k}])' for k in range(8))


WMMA_OPERANDS = {"load": _fragment("=r") + " :", "store": ": " + _fragment("r") + ","}  # out / in


def _wmma(kind: str, space: str) -> Form:
    """One 16 x 16 tile: f16 (512 contiguous bytes) loaded, f32 (1024 bytes) stored."""
    addr = WMMA_ADDRESS[space]
    dotted = "" if space.startswith("generic") else f".{space}"
    regs = "{%0, %1, %2, %3, %4, %5, %6, %7}"
    into_shared = space == "shared" or addr == "%9"
    where = "shared" if into_shared else "global"
    if kind == "load":
        text = f"wmma.load.a.sync.aligned.row.m16n16k16{dotted}.f16 {regs}, [{addr}], 16;"
        nbytes, direction = 512, "load"
    else:
        text = f"wmma.store.d.sync.aligned.row.m16n16k16{dotted}.f32 [{addr}], {regs}, 16;"
        nbytes, direction = 1024, "store"
    if where == "global":
        events = {"requests": 1, "values": 256, "bytes": nbytes, "sectors": nbytes // 32}
    else:
        events = {"requests": 1, "values": 256, "bytes": nbytes, "wavefronts": nbytes // 128, "conflicts": 0}
    reaches = where if space.startswith("generic") else ""
    return Form("wmma", f"{kind}.{space.strip()}", text, counts(where, direction, events), reaches)


WMMA_FORMS = [_wmma(kind, space) for kind in ("load", "store") for space in WMMA_ADDRESS]
# ldmatrix / stmatrix .x4: lane l gives row l at 16 l bytes into s, 512 contiguous bytes
MATRIX_ROW = {
    "shared": ("{.reg .u32 %%a; mov.u32 %%a, %%tid.x; mad.lo.u32 %%a, %%a, 16, %10; ", ".shared"),
    "generic": ("{.reg .u64 %%a; .reg .u32 %%t; mov.u32 %%t, %%tid.x; mad.wide.u32 %%a, %%t, 16, %9; ", ""),
}


def _matrix(op: str, space: str) -> Form:
    row, dotted = MATRIX_ROW[space]
    operands = "{%0, %1, %2, %3}, [%%a]" if op == "ldmatrix" else "[%%a], {%0, %1, %2, %3}"
    events = {"requests": 1, "values": 256, "bytes": 512, "wavefronts": 4, "conflicts": 0}
    expected = counts("shared", "load" if op == "ldmatrix" else "store", events)
    text = f"{row}{op}.sync.aligned.m8n8.x4{dotted}.b16 {operands};}}"
    return Form(op, space, text, expected, "shared" if space == "generic" else "")


MATRIX_FORMS = [_matrix(op, space) for op in ("ldmatrix", "stmatrix") for space in MATRIX_ROW]


@pytest.mark.parametrize("form", WMMA_FORMS + MATRIX_FORMS, ids=lambda f: f.id)
def test_each_warp_matrix_transfer_is_counted_where_it_reaches(form):
    writes = form.op == "stmatrix" or form.space.startswith("store")
    operands = WMMA_OPERANDS["store" if writes else "load"]
    source = WMMA.replace("FORM", f'"{form.asm}"').replace("OPERANDS", operands)
    result = _run_wide(source)
    assert result.findings == [], [f.message for f in result.findings]
    row = result.counters.by_line.get(line_of(source, "// probe"), {})
    assert _traffic(row) == {name: n for name, n in form.expected.items() if n}


def _run_wide(source: str):
    x = np.arange(1, 257, dtype=np.uint32)
    return launch(source, "tile", 1, 32, [Buffer("x", x), out("y", 256, np.uint32)])


# ----- the table above covers every memory opcode, space and atomic operation -----------
SPACES_OF = {  # opcode -> the state spaces its forms must cover
    "ld": (*access.SPACES, "generic"),
    "ldu": ("global", "generic"),
    "st": (*access.SPACES, "generic"),
    "atom": ("global", "shared", "generic"),
    "red": ("global", "shared", "generic"),
    "cp": ("global->shared",),
    "wmma": ("load.global", "load.shared", "load.generic", "store.global", "store.shared", "store.generic"),
    "ldmatrix": ("shared", "generic"),
    "stmatrix": ("shared", "generic"),
}


def test_the_memory_opcodes_are_those_the_forms_cover():
    found = memory_opcodes()
    assert found == set(SPACES_OF), f"add forms (and counts) for {sorted(found - set(SPACES_OF))}"
    assert not found & PURE_OPS, "a memory opcode classified as pure would run on exited lanes"


def test_every_other_opcode_is_pure_or_moves_no_data():
    unclassified = set(OPS) - PURE_OPS - memory_opcodes() - set(NOT_MEMORY)
    assert not unclassified, f"say whether {sorted(unclassified)} read or write memory (and count them)"


@pytest.mark.parametrize("op", sorted(SPACES_OF))
def test_every_space_of_every_memory_opcode_has_a_form(op):
    covered = {f.space for f in FORMS + WMMA_FORMS + MATRIX_FORMS if f.op == op}
    assert set(SPACES_OF[op]) <= covered


@pytest.mark.parametrize("kind", ["atom", "red"])
def test_every_atomic_operation_is_counted_in_each_space(kind):
    operations = {f.asm.split(".")[1 if f.space == "generic" else 2] for f in ATOMICS if f.op == kind}
    expected = set(access.ATOM_OPS) - (set(NO_RED) if kind == "red" else set())
    assert operations == expected


TWO_BUFFERS = r"""
extern "C" __global__ void pick(const unsigned* a, const unsigned* b, unsigned* y) {
    unsigned t = threadIdx.x;
    const unsigned* p = (t & 1) ? b : a;
    y[t] = p[t];  // load
}
"""


def test_a_warp_reading_two_buffers_counts_the_sectors_of_both():
    # the buffers lie 4 GiB apart at least, at random: their sectors never merge
    data = np.arange(32, dtype=np.uint32)
    args = [Buffer("a", data), Buffer("b", data + 100), out("y", 32, np.uint32)]
    result = launch(TWO_BUFFERS, "pick", 1, 32, args)
    np.testing.assert_array_equal(result.outputs["y"], data + 100 * (data & 1))
    row = result.counters.by_line[line_of(TWO_BUFFERS, "// load")]
    assert row["global_load_sectors"] == 8 and row["global_load_requests"] == 1
