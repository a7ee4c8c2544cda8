"""The assignment spec: what an instructor writes in ``assignments/<name>/spec.py``.

A spec file defines ``SPEC = Spec(...)`` and nothing in ``autograder/`` changes when one is
added. Sizes, scalar values, defines and launch geometry are *expressions* of the case
parameters (strings such as ``"n + 4"`` or ``"cdiv(n, T)"``), so the handout, the TA report
and the grader all show the same formula. A case is a dict of parameter values; case
groups (``aligned``, ``ragged``, ``safety``, ``perf``, or any other name) are lists of cases.
Besides the cases it lists, a group may draw cases from the grading's secret seed (``draws``,
each a :class:`Draw`: fixed parameters, and bounds for the sizes), so that no kernel can tell a
graded case by its size; ``cases.with_drawn`` draws them.

The numpy reference receives every input array (float64 copies, reshaped by ``shape``
when given) and every scalar by name as keyword arguments, and returns a dict of output
arrays by name.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from autograder.contract import COUNTER_NAMES, VALUES_FROM_BYTES
from autograder.errors import AutograderError

Case = Mapping[str, int | float]


@dataclass(frozen=True)
class Array:
    name: str
    size: str  # number of elements, an expression of the case
    dtype: str = "float32"
    intent: str = "in"  # "in", "out" or "inout"
    shape: tuple[str, ...] | None = None  # for the numpy reference; defaults to (size,)


@dataclass(frozen=True)
class Scalar:
    name: str
    value: str  # an expression of the case
    dtype: str = "int32"


@dataclass(frozen=True)
class Tolerance:
    """An output passes where ``|out - ref| <= atol + rtol * |ref|`` (both expressions).

    Integer outputs and infinite reference values must match exactly."""

    rtol: str = "1e-5"
    atol: str = "1e-5"


@dataclass(frozen=True)
class Draw:
    """``count`` cases a group draws from the grading's seed: the parameters of ``like``, and each
    parameter of ``sizes`` uniform in its bounds ``(low, high)`` (inclusive), never a value that
    any case group lists for it. A parameter of ``tile`` is ragged: not a multiple of its
    expression (of ``like``), or with ``aligned``, a multiple of it."""

    like: Case
    sizes: Mapping[str, tuple[int, int]]
    tile: Mapping[str, str] = field(default_factory=dict)
    aligned: bool = False
    count: int = 1


@dataclass(frozen=True)
class Spec:
    name: str  # the assignment's name; the submission file is ``<name>.cu``
    kernel: str
    args: tuple[Array | Scalar, ...]
    block: tuple[str, ...]  # up to three expressions
    grid: tuple[str, ...]
    cases: Mapping[str, tuple[Case, ...]]
    reference: Callable[..., Mapping[str, npt.ArrayLike]]  # the numpy reference: outputs by name
    tolerance: Tolerance = Tolerance()
    defines: Mapping[str, str] = field(default_factory=dict)  # -D NAME=<expression>
    shared_bytes: str = "0"  # dynamic shared memory, an expression of the case
    flops: str = "0"  # arithmetic any correct kernel must do, an expression (physical floor)
    time_limit_s: float = 20.0  # per launch
    # (rng, case) -> {name: array}; default uniform, never 0
    inputs: Callable[[np.random.Generator, Case], Mapping[str, npt.ArrayLike]] | None = None
    # the lecture's closed forms: counter (backends.base.COUNTER_NAMES) -> an expression of the
    # case, shown by ``autograder profile`` beside the student's and the reference's counts
    ledger: Mapping[str, str] = field(default_factory=dict)
    draws: Mapping[str, tuple[Draw, ...]] = field(default_factory=dict)  # group -> cases it draws
    # the cases drawn for one grading, by group, after the listed ones: set by ``cases.with_drawn``
    drawn: Mapping[str, tuple[Case, ...]] = field(default_factory=dict)
    # the bytes of one of the assignment's values: the traffic items' and the ledger's ``*_values``
    # are the counted bytes over it (``value_bytes``), whatever type a kernel moves them as. One
    # size, or per values counter (``backends.base.VALUES_FROM_BYTES``); None, or a counter not
    # given: the element size of the input arrays' dtype (the first input's where they differ)
    element_bytes: int | Mapping[str, int] | None = None

    def value_bytes(self, counter: str) -> int:
        """The bytes of one value of ``counter`` (a ``*_values`` counter)."""
        given = self.element_bytes
        if isinstance(given, int):
            return given
        if given and counter in given:
            return given[counter]
        inputs = [a for a in self.args if isinstance(a, Array) and a.intent != "out"]
        return np.dtype(inputs[0].dtype if inputs else Array.dtype).itemsize


_OPERATORS: dict[type[ast.operator | ast.unaryop], Callable[..., int | float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCTIONS: dict[str, Callable[..., int | float]] = {
    "cdiv": lambda a, b: -(-a // b),
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log2": math.log2,
    "ceil": math.ceil,
    "floor": math.floor,
    "int": int,
    "abs": abs,
}


def evaluate(expression: str | int | float, case: Case) -> int | float:
    """Evaluate a spec expression over the case's parameters (arithmetic and _FUNCTIONS only)."""
    if isinstance(expression, int | float):
        return expression
    try:
        value = _eval(_parsed(expression), case)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value} is not a finite number")
        return value
    except (SyntaxError, KeyError, TypeError, ValueError, ArithmeticError) as e:
        raise SpecError(f"cannot evaluate {expression!r} for case {dict(case)}: {e}") from e


@functools.lru_cache(maxsize=4096)
def _parsed(expression: str) -> ast.expr:
    """The expression's tree, parsed once: a grade evaluates a course's few dozen expressions
    thousands of times (sizes, geometry, tolerances per case), and ``_eval`` only reads the tree."""
    return ast.parse(expression, mode="eval").body


def _eval(node: ast.AST, case: Case) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in case:
            raise KeyError(f"unknown parameter {node.id!r}")
        return case[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_eval(node.left, case), _eval(node.right, case))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_eval(node.operand, case))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _FUNCTIONS[node.func.id](*(_eval(a, case) for a in node.args))
    raise ValueError(f"unsupported syntax {ast.dump(node)}")


def dim3(expressions: tuple[str, ...], case: Case) -> tuple[int, int, int]:
    """Launch geometry (x, y, z) from up to three expressions; those not given are 1."""
    if len(expressions) > 3:  # a fourth would make a launch no GPU has (load_spec refuses it)
        raise SpecError(f"{expressions}: launch geometry has at most three expressions (x, y, z)")
    x, y, z = [int(evaluate(e, case)) for e in expressions] + [1] * (3 - len(expressions))
    return x, y, z


class SpecError(AutograderError):
    """An assignment spec is malformed; the message names the file or expression."""


def load_spec(directory: Path) -> Spec:
    """Import ``directory/spec.py`` and return its ``SPEC``."""
    path = directory / "spec.py"
    module_name = f"_assignment_spec_{directory.name}"
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None or loader.loader is None:
        raise SpecError(f"{path}: not found")
    module = importlib.util.module_from_spec(loader)
    try:
        loader.loader.exec_module(module)
    except Exception as e:
        raise SpecError(f"{path}: {type(e).__name__}: {e}") from e
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, Spec):
        raise SpecError(f"{path}: defines no SPEC = Spec(...)")
    if spec.name != directory.name:
        raise SpecError(f"{path}: SPEC.name is {spec.name!r}, the folder is {directory.name!r}")
    for what, expressions in (("block", spec.block), ("grid", spec.grid)):
        if len(expressions) > 3:
            raise SpecError(f"{path}: {what} has {len(expressions)} expressions; at most three (x, y, z)")
    empty = [group for group, cases in spec.cases.items() if not cases]
    if empty:  # an item on it would pass every gate with nothing run
        raise SpecError(f"{path}: case group {empty[0]!r} has no cases")
    unknown = sorted(set(spec.ledger) - set(COUNTER_NAMES))
    if unknown:
        raise SpecError(f"{path}: ledger counter {unknown[0]!r} is not one of {', '.join(COUNTER_NAMES)}")
    for group, draws in spec.draws.items():
        for draw in draws:
            _check_draw(path, spec, group, draw)
    _check_element_bytes(path, spec)
    return spec


def _check_element_bytes(path: Path, spec: Spec) -> None:
    """Positive sizes, of values counters only."""
    given = spec.element_bytes
    sizes = {"element_bytes": given} if isinstance(given, int) else dict(given or {})
    unknown = [] if isinstance(given, int) else sorted(set(sizes) - set(VALUES_FROM_BYTES))
    if unknown:
        raise SpecError(
            f"{path}: element_bytes names {unknown[0]!r}, not one of {', '.join(VALUES_FROM_BYTES)}"
        )
    bad = [
        name
        for name, size in sizes.items()
        if not isinstance(size, int) or isinstance(size, bool) or size < 1
    ]
    if bad:
        raise SpecError(f"{path}: element_bytes of {bad[0]} must be a positive number of bytes")


def _check_draw(path: Path, spec: Spec, group: str, draw: Draw) -> None:
    """A draw of a group the spec has, with the listed cases' parameters, sane bounds and tiles."""
    where = f"{path}: the draw of case group {group!r}"
    if group not in spec.cases:
        raise SpecError(f"{where}: the spec has no such group")
    parameters = set(spec.cases[group][0])
    if set(draw.like) | set(draw.sizes) != parameters or set(draw.like) & set(draw.sizes):
        raise SpecError(f"{where}: like and sizes must name each of {sorted(parameters)} once")
    bad = [name for name, (low, high) in draw.sizes.items() if not 1 <= low <= high]
    if bad or draw.count < 1:
        raise SpecError(f"{where}: {bad[0] if bad else 'count'} must have 1 <= low <= high (count >= 1)")
    if not set(draw.tile) <= set(draw.sizes):
        raise SpecError(f"{where}: tile names {sorted(set(draw.tile) - set(draw.sizes))}, not a size")
    for expression in draw.tile.values():
        evaluate(expression, draw.like)


def load_specs(root: Path) -> dict[str, Spec]:
    """Every assignment under ``root/assignments``, by name."""
    if not (root / "assignments").is_dir():
        raise SpecError(f"{root / 'assignments'}: no such folder (is {root} the course root?)")
    folders = sorted((root / "assignments").iterdir())
    return {d.name: load_spec(d) for d in folders if (d / "spec.py").exists()}
