"""Random programs, seeded and reproducible: straight-line and looped unsigned-integer and float
code with branches on each thread's data (divergence), loops whose trip counts differ per
thread, values exchanged through shared memory between barriers, and warp shuffles. Every
operation is defined for every input (unsigned arithmetic wraps, shifts are masked, divisors
are odd, floats are clamped before they become integers), so the GPU's answer is the answer."""

from __future__ import annotations

import numpy as np

VARIABLES = 4  # u0..u3 (unsigned), f0..f3 (float) per thread
BLOCK = 128
GRID = 2

_INT_BINARY = [
    "({a} + {b})",
    "({a} - {b})",
    "({a} * {b})",
    "({a} ^ {b})",
    "({a} & {b})",
    "({a} | {b})",
    "({a} << ({b} & 31u))",
    "({a} >> ({b} & 31u))",
    "({a} / ({b} | 1u))",
    "({a} % ({b} | 1u))",
    "min({a}, {b})",
    "max({a}, {b})",
    "__umulhi({a}, {b})",
    "__funnelshift_l({a}, {b}, {a})",
    "((int){a} < (int){b} ? {a} : {b})",
]
_INT_UNARY = [
    "__popc({a})",
    "__clz({a})",
    "__brev({a})",
    "(~{a})",
    "(unsigned)(int)fminf(fmaxf({f}, -2e9f), 2e9f)",
    "__float_as_uint({f})",
]
# Float arithmetic as __fadd_rn and the like (PTX add.rn.f32, which ptxas never fuses): a plain
# a * b + c may become one fma in ptxas and not in the PTX the emulator runs (known-gaps.md);
# no library function built on approximate instructions (sinf, logf, rsqrtf: their own
# conformance is the instruction suite's, within the ISA's bounds).
_FLOAT_BINARY = [
    "__fadd_rn({a}, {b})",
    "__fsub_rn({a}, {b})",
    "__fmul_rn({a}, {b})",
    "__fdiv_rn({a}, {b})",
    "fminf({a}, {b})",
    "fmaxf({a}, {b})",
    "fmaf({a}, {b}, {c})",
    "copysignf({a}, {b})",
]
_FLOAT_UNARY = [
    "__fsqrt_rn(fabsf({a}))",
    "(float){u}",
    "(float)(int){u}",
    "floorf({a})",
    "truncf({a})",
    "rintf({a})",
    "__uint_as_float({u} & 0x807fffffu | 0x3f000000u)",
    "__fadd_rz({a}, 1.5f)",
    "__fmul_rd({a}, {a})",
    "__saturatef({a})",
    "__int_as_float(__float2int_rn({a}))",
]


class _Writer:
    def __init__(self, rng: np.random.Generator):
        self.rng, self.lines, self.loops = rng, [], 0

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def uvar(self) -> str:
        return f"u{self.rng.integers(VARIABLES)}"

    def fvar(self) -> str:
        return f"f{self.rng.integers(VARIABLES)}"

    def int_expr(self, depth: int) -> str:
        if depth == 0 or self.rng.random() < 0.3:
            leaves = [self.uvar(), self.uvar(), f"{int(self.rng.integers(1 << 32))}u", "t"]
            return self.pick([*leaves, f"i{self.loops - 1}"] if self.loops else leaves)
        if self.rng.random() < 0.25:
            return self.pick(_INT_UNARY).format(a=self.int_expr(depth - 1), f=self.float_expr(depth - 1))
        return self.pick(_INT_BINARY).format(a=self.int_expr(depth - 1), b=self.int_expr(depth - 1))

    def float_expr(self, depth: int) -> str:
        if depth == 0 or self.rng.random() < 0.3:
            constant = float(np.float32(self.rng.standard_normal() * 10))
            return self.pick([self.fvar(), self.fvar(), f"{constant!r}f"])
        if self.rng.random() < 0.3:
            return self.pick(_FLOAT_UNARY).format(a=self.float_expr(depth - 1), u=self.int_expr(depth - 1))
        a, b, c = (self.float_expr(depth - 1) for _ in range(3))
        return self.pick(_FLOAT_BINARY).format(a=a, b=b, c=c)

    def condition(self) -> str:
        return self.pick(
            [
                f"({self.int_expr(1)}) < ({self.int_expr(1)})",
                f"(({self.int_expr(1)}) & 4u)",
                f"{self.fvar()} < {self.fvar()}",
                "(t & 1u)",
                f"{self.uvar()} == {self.uvar()}",
            ]
        )

    def statements(self, count: int, depth: int, top: bool, indent: str) -> None:
        for _ in range(count):
            choice = self.rng.random()
            if choice < 0.35:
                self.lines.append(f"{indent}{self.uvar()} = {self.int_expr(3)};")
            elif choice < 0.65:
                self.lines.append(f"{indent}{self.fvar()} = {self.float_expr(3)};")
            elif choice < 0.75 and depth:
                self.lines.append(f"{indent}if ({self.condition()}) {{")
                self.statements(2, depth - 1, False, indent + "    ")
                self.lines.append(f"{indent}}} else {{")
                self.statements(2, depth - 1, False, indent + "    ")
                self.lines.append(f"{indent}}}")
            elif choice < 0.85 and depth:
                i = f"i{self.loops}"
                self.lines.append(f"{indent}for (unsigned {i} = 0; {i} < ({self.uvar()} & 7u); ++{i}) {{")
                self.loops += 1
                self.statements(2, depth - 1, False, indent + "    ")
                self.loops -= 1
                self.lines.append(f"{indent}}}")
            elif top and choice < 0.93:
                shift = int(self.rng.integers(1, BLOCK))
                kind, var = self.pick([("su", self.uvar()), ("sf", self.fvar())])
                target = ("u" if kind == "su" else "f") + str(self.rng.integers(VARIABLES))
                self.lines += [
                    f"{indent}{kind}[threadIdx.x] = {var};",
                    f"{indent}__syncthreads();",
                    f"{indent}{target} = {kind}[(threadIdx.x + {shift}u) % blockDim.x];",
                    f"{indent}__syncthreads();",
                ]
            elif top:
                lane = int(self.rng.integers(1, 32))
                self.lines.append(
                    f"{indent}{self.uvar()} = __shfl_xor_sync(0xffffffffu, {self.uvar()}, {lane});"
                )


def program(name: str, rng: np.random.Generator) -> str:
    writer = _Writer(rng)
    writer.statements(int(rng.integers(8, 16)), 2, True, "    ")
    loads = " ".join(
        f"unsigned u{k} = xi[t * {VARIABLES} + {k}]; float f{k} = xf[t * {VARIABLES} + {k}];"
        for k in range(VARIABLES)
    )
    stores = " ".join(
        f"yi[t * {VARIABLES} + {k}] = u{k}; yf[t * {VARIABLES} + {k}] = f{k};" for k in range(VARIABLES)
    )
    return (
        f'extern "C" __global__ void {name}(\n'
        f"        const unsigned* xi, const float* xf, unsigned* yi, float* yf) {{\n"
        f"    __shared__ unsigned su[{BLOCK}];\n    __shared__ float sf[{BLOCK}];\n"
        f"    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;\n    {loads}\n"
        + "\n".join(writer.lines)
        + f"\n    {stores}\n}}\n"
    )


def inputs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each thread's starting values: integers small and large, floats ordinary and special."""
    n = GRID * BLOCK * VARIABLES
    xi = np.where(rng.random(n) < 0.5, rng.integers(0, 1 << 32, n), rng.integers(0, 64, n)).astype(np.uint32)
    xf = (rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8, n)).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3.4e38], np.float32)
    pick = rng.random(n) < 0.05
    xf[pick] = special[rng.integers(0, special.size, int(pick.sum()))]
    return xi, xf
