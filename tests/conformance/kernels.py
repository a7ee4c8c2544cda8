"""CUDA source for the instruction kernels of ``alu.py``: inline PTX between loads and stores."""

from __future__ import annotations

from dataclasses import dataclass

from .alu import REGISTERS, Instruction, Operand

WAYS = ("converged", "diverged", "aliased")


@dataclass(frozen=True)
class Written:
    name: str  # the kernel's name
    source: str  # its definition
    inputs: tuple[Operand, ...]  # in argument order, then the lane mask ``on``, then the outputs
    outputs: tuple[Operand, ...]


def aliased_source(ins: Instruction) -> Operand | None:
    """The source whose register the destination takes in the ``aliased`` way: the last one of
    the destination's type (``c`` of ``mad d, a, b, c``, ``a`` of ``add d, a, b``)."""
    if len(ins.destinations) != 1 or ins.destinations[0].role != "d":
        return None
    kind = REGISTERS[ins.destinations[0].kind]
    same = [o for o in ins.sources if o.role != "q" and REGISTERS[o.kind] == kind]
    return same[-1] if same else None


def kernel(name: str, ins: Instruction, way: str) -> Written:
    alias = aliased_source(ins) if way == "aliased" else None
    outs, ins_ = ins.destinations, ins.sources
    params = [f"const {REGISTERS[o.kind][0]}* {o.role}_in" for o in ins_] + ["const unsigned* on"]
    params += [f"{REGISTERS[o.kind][0]}* {o.role}_out" for o in outs]
    names, out_args, in_args, prologue, epilogue = {}, [], [], [], []
    for k, o in enumerate(outs):
        names[o.role] = f"%{k}"
        ctype, letter = REGISTERS[o.kind]
        init = f" = {alias.role}_in[t]" if alias is not None else ""
        prologue.append(f"{ctype} r_{o.role}{init};")
        out_args.append(f'"{"+" if alias is not None else "="}{letter}"(r_{o.role})')
        epilogue.append(f"{o.role}_out[t] = r_{o.role};")
    for o in ins_:
        if o is alias:
            names[o.role] = names["d"]
            continue
        names[o.role] = f"%{len(outs) + len(in_args)}"
        in_args.append(f'"{REGISTERS[o.kind][1]}"({o.role}_in[t])')
    text = _ptx(ins, names)
    guard = "if (on[t]) " if way == "diverged" else ""
    body = f'asm volatile("{text}" : {", ".join(out_args)} : {", ".join(in_args)});'
    source = (
        f'extern "C" __global__ void {name}({", ".join(params)}) {{\n'
        f"    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    {guard}{{\n        {' '.join(prologue)}\n        {body}\n"
        f"        {' '.join(epilogue)}\n    }}\n}}\n"
    )
    return Written(name, source, ins_, outs)


def _ptx(ins: Instruction, names: dict[str, str]) -> str:
    """The instruction with its operands named, predicates through scoped registers."""
    pre, post, operands = [], [], []
    for o in ins.operands:
        if o.role == "p":
            operands.append("%%cp")
            post.append(f"selp.u32 {names['p']}, 1, 0, %%cp;")
        elif o.role == "q":
            operands.append("%%cq")
            pre.append(f"setp.ne.u32 %%cq, {names['q']}, 0;")
        else:
            operands.append(names[o.role])
    preds = [f".reg .pred {r};" for r, used in (("%%cp", post), ("%%cq", pre)) if used]
    core = f"{ins.text} {', '.join(operands)};"
    if not preds:
        return core
    return "{ " + " ".join([*preds, *pre, core, *post]) + " }"
