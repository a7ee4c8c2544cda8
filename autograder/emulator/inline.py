"""Inline the module's device functions into the kernel before decoding, as a compiler
would: each call site gets a copy of the callee's body with its registers and labels
renamed (``%f1`` -> ``%f1_i3``), its ``ret`` a branch to the statement after
the call, and its ``.loc`` lines kept, so findings name the callee's source line; each
copied statement also keeps its call sites (``Statement.calls``: the function and the line of
its call, innermost first), so findings name the call too, as for a helper NVRTC inlined
itself (``ptx.py`` reads those from the ``.loc`` lines' ``inlined_at``).

Parameters pass through registers: the caller's ``st.param [param0+off]`` before the call
and the callee's ``ld.param [f_param_0+off]`` both become a ``mov`` of one register per call
site, parameter and offset (a *slot*), and likewise ``st.param [func_retval0+off]`` in the
callee and ``ld.param [retval0+off]`` after the call. Nested calls inline recursively;
recursion and calls through a function pointer stay ``Unsupported``. Every call site of a
function shares its ``.local`` frame (without recursion no lane is in two calls of it at
once); the frames of different functions add up where a GPU would reuse one stack."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

from autograder.contract import Unsupported
from autograder.emulator.isa import TYPE_BYTES
from autograder.emulator.ptx import Function, Kernel, Statement, readable

_CALL = re.compile(
    r"^(?P<guard>@!?%[\w$]+\s+)?call(?:\.uni)?\s+(?:\((?P<returns>[^)]*)\)\s*,\s*)?"
    r"(?P<target>[%\w$]+)\s*(?:,\s*\((?P<args>[^)]*)\))?\s*(?:,\s*[\w$]+)?$",
    re.S,
)
_PARAM_ACCESS = re.compile(
    r"^(?P<op>ld|st)\.param(?P<mods>(?:\.\w+)+)\s+(?P<a>\{[^}]*\}|[^,]+?)\s*,\s*(?P<b>.*)$",
    re.S,
)
_ADDRESS = re.compile(r"^\[\s*([\w$]+)\s*(?:\+\s*(\d+))?\s*\]$")
_RET = re.compile(r"^(@!?%[\w$]+\s+)?ret(?:\.uni)?$")
_NAME = re.compile(r"[%$\w.]+")
MAX_INLINED = 200_000  # statements of a kernel with its calls inlined (references: < 7 000)

Item = Statement | str  # a statement, or the name of a label before the next statement


def inline_calls(kernel: Kernel, functions: dict[str, Function], filename: str) -> None:
    """Replace every call of ``kernel`` to a function of ``functions`` by its body."""
    if not any(_is_call(s) for s in kernel.body):
        return
    inliner = _Inliner(kernel, functions, filename)
    items = inliner.expand(_items(kernel), kernel.call_params, {}, ())
    kernel.body, kernel.labels = [], {}
    for item in items:
        if isinstance(item, str):
            kernel.labels[item] = len(kernel.body)
        else:
            kernel.body.append(item)


def _items(body: Kernel) -> list[Item]:
    at: dict[int, list[str]] = {}
    for label, index in body.labels.items():
        at.setdefault(index, []).append(label)
    items: list[Item] = []
    for index, statement in enumerate(body.body):
        items += at.get(index, [])
        items.append(statement)
    return items + at.get(len(body.body), [])


def _is_call(item: Item) -> bool:
    if isinstance(item, str) or not item.text.startswith(("call", "@")):
        return False
    return _CALL.match(item.text) is not None


def _callee(item: Item, functions: dict[str, Function]) -> str | None:
    """The name of the module function ``item`` calls directly, if it is such a call."""
    match = _CALL.match(item.text) if _is_call(item) else None
    return match["target"] if match and match["target"] in functions else None


class _Inliner:
    def __init__(self, kernel: Kernel, functions: dict[str, Function], filename: str):
        self.kernel = kernel
        self.functions = functions
        self.filename = filename
        self.sites = itertools.count(1)
        self.framed: set[str] = set()
        self.size = len(kernel.body)  # statements so far, bounded by MAX_INLINED

    def expand(
        self, items: list[Item], call_params, bound: dict[str, tuple[int, str]], stack: tuple[str, ...]
    ) -> list[Item]:
        """``items`` with their calls inlined; ``bound`` maps the enclosing function's own
        parameters to (call site, caller's parameter), ``call_params`` are its call
        sequences' ``.param`` names."""
        inlined, following, preceding = self._sites(items)
        out: list[Item] = []
        for k, item in enumerate(items):
            access = None if isinstance(item, str) else _PARAM_ACCESS.match(item.text)
            if k in inlined:
                out += self._inline(item, inlined[k], stack)
            elif access is None:
                out.append(item)
            else:
                out += self._pass(
                    item, access, bound, call_params, following[k] if access["op"] == "st" else preceding[k]
                )
        return out

    def _pass(self, item: Statement, access, bound, call_params, site: int | None) -> list[Item]:
        """A ``ld.param``/``st.param`` that passes a value to or from an inlined call as
        ``mov``s of its slots; any other (the kernel's parameters, ``printf``'s) as it is."""
        name, offset = _param_address(access)
        if name in bound:
            site, name = bound[name]
        elif name not in call_params or site is None:
            return [item]
        return self._moves(item, access, site, name, offset)

    def _sites(self, items: list[Item]):
        """The call site of each inlined call by position; for each position, the site of
        the next call (whose ``st.param`` it may be) and of the previous call (whose
        ``ld.param`` it may be), None where that call is not inlined (``printf``)."""
        at: dict[int, int] = {}
        is_call = [_is_call(item) for item in items]
        for k, item in enumerate(items):
            if is_call[k] and _CALL.match(item.text)["target"].startswith("%"):
                raise Unsupported(f"calls through a function pointer are not emulated{self._at(item)}")
            if _callee(item, self.functions):
                at[k] = next(self.sites)
        following: list[int | None] = [None] * len(items)
        current = None
        for k in range(len(items) - 1, -1, -1):
            following[k] = current
            if is_call[k]:
                current = at.get(k)
        preceding: list[int | None] = [None] * len(items)
        current = None
        for k in range(len(items)):
            preceding[k] = current
            if is_call[k]:
                current = at.get(k)
        return at, following, preceding

    def _at(self, statement: Statement) -> str:
        return f" ({self.filename}:{statement.line})" if statement.line else ""

    def _inline(self, call: Statement, site: int, stack: tuple[str, ...]) -> list[Item]:
        match = _CALL.match(call.text)
        name = match["target"]
        if name in stack:
            raise Unsupported(f"recursive device functions are not emulated{self._at(call)}")
        function = self.functions[name]
        body = function.body
        returns = _names(match["returns"])
        args = _names(match["args"])
        if len(returns) != len(function.returns) or len(args) != len(body.params):
            raise Unsupported(f"a call to {name} does not match its declaration")
        self._grow(len(body.body), call)
        bound = dict(zip(function.returns, ((site, r) for r in returns), strict=True))
        bound.update(zip((p.name for p in body.params), ((site, a) for a in args), strict=True))
        end = f"$__ret_i{site}"
        out: list[Item] = []
        if match["guard"]:
            guard = match["guard"].strip()[1:]
            flipped = guard[1:] if guard.startswith("!") else "!" + guard
            out.append(replace(call, text=f"@{flipped} bra {end}"))
        copy = self._copy(body, site, end, call)
        out += self.expand(copy, body.call_params, bound, (*stack, name))
        return [*out, end]

    def _grow(self, statements: int, call: Statement) -> None:
        """Count an inlined body; past ``MAX_INLINED`` (functions that call others several
        times each, nested: twice at each of 20 levels is a million copies) stop."""
        self.size += statements
        if self.size > MAX_INLINED:
            raise Unsupported(
                f"inlining the device functions the kernel calls makes more than {MAX_INLINED:,} "
                f"instructions, more than the emulator runs{self._at(call)} (a GPU calls them)"
            )

    def _copy(self, body: Kernel, site: int, end: str, call: Statement) -> list[Item]:
        """The callee's statements and labels with its names made unique to ``site``, each
        with its call sites (a statement without a line of its own: those of ``call``)."""
        outer = call.calls
        calls = ((readable(body.name), call.line), *outer)
        rename = {name: f"{name}_i{site}" for name in (*body.registers, *body.labels)}
        if body.name not in self.framed:  # one frame per function: no lane is in two calls of it
            self.framed.add(body.name)
            self.kernel.variables += body.variables
        for reg, type_ in body.registers.items():
            self.kernel.registers[rename[reg]] = type_
        for name, type_ in body.call_params.items():
            self.kernel.call_params.setdefault(name, type_)
        copy: list[Item] = []
        for item in _items(body):
            if isinstance(item, str):
                copy.append(rename[item])
                continue
            text = _NAME.sub(lambda m: rename.get(m.group(0), m.group(0)), item.text)
            ret = _RET.match(text)
            if ret:
                text = f"{ret.group(1) or ''}bra {end}"
            copy.append(Statement(text, item.line, calls) if item.line else Statement(text, call.line, outer))
        return copy

    def _moves(self, item: Statement, access, site: int, name: str, offset: int) -> list[Statement]:
        """``ld.param``/``st.param`` of a parameter slot as ``mov``s, one per vector element."""
        mods = [m for m in access["mods"].split(".") if m]
        type_ = next(m for m in reversed(mods) if m in TYPE_BYTES)
        size = TYPE_BYTES[type_]
        values = access["a"] if access["op"] == "ld" else access["b"]
        elements = [v.strip() for v in values.strip().strip("{}").split(",")]
        moves = []
        for k, value in enumerate(elements):
            if value == "_":
                continue
            slot = self._slot(site, name, offset + k * size, size)
            pair = (value, slot) if access["op"] == "ld" else (slot, value)
            moves.append(replace(item, text=f"mov.{type_} {pair[0]}, {pair[1]}"))
        return moves

    def _slot(self, site: int, name: str, offset: int, size: int) -> str:
        slot = f"%{name}_{offset}_c{site}"
        self.kernel.registers.setdefault(slot, f"b{8 * size}")
        return slot


def _param_address(access) -> tuple[str, int]:
    address = access["b"] if access["op"] == "ld" else access["a"]
    match = _ADDRESS.match(address.strip())
    if match is None:
        return "", 0
    return match.group(1), int(match.group(2) or 0)


def _names(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]
