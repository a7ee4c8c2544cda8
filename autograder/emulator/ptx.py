"""Parse PTX text, as NVRTC writes it, into plain data: kernels, their parameters,
registers, variables and statements, each statement with its source line (from ``.loc``).
The module's ``.func`` bodies are parsed alike and returned beside the kernel, for
``inline.py`` to inline into it."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from autograder.emulator.isa import TYPE_BYTES

_REG_DECL = re.compile(r"\.reg\s+\.(\w+)\s+(.*)")
_RANGE = re.compile(r"^(%?[\w$]+)<(\d+)>$")
_VAR_DECL = re.compile(
    r"^(?P<extern>\.extern\s+)?(?:\.visible\s+|\.weak\s+)?\.(?P<space>global|const|shared|local)\s+"
    r"(?:\.align\s+(?P<align>\d+)\s+)?\.(?P<type>\w+)\s+(?P<name>[\w$]+)"
    r"(?:\[(?P<count>\d*)\])?(?:\s*=\s*(?P<init>.*))?$"
)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)(?:\[(\d+)\])?")
_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\((.*)\)", re.S)
_FUNC = re.compile(r"\.func\s+(?:\((?P<returns>[^)]*)\)\s*)?(?P<name>[\w$]+)\s*(?:\((?P<params>.*)\))?", re.S)
_LABEL = re.compile(r"^([\w$.]+):\s*(.*)$")  # a label, alone or before a statement

# (file, line, function) of a statement, then of each call it is inlined at; the function is
# the ``.loc``'s ``function_name`` (a ``.debug_str`` label) for a line of an inlined function
Loc = tuple[tuple[int, int, str | None], ...]
Calls = tuple[tuple[str, int | None], ...]  # (a helper NVRTC inlined, the line of its call), innermost first


@dataclass
class Variable:
    """A ``.global``/``.const``/``.shared``/``.local`` variable (module or kernel scope)."""

    name: str
    space: str
    type: str
    size: int  # bytes; 0 for ``extern .shared`` arrays of unknown size
    align: int
    init: bytes | None = None  # the initialised bytes at its start (the rest are zeros)
    extern: bool = False


@dataclass
class Param:
    name: str
    type: str
    size: int
    align: int


@dataclass
class Statement:
    text: str  # one instruction, without the ';'
    line: int | None  # source line in the main file
    # a line of an inlined helper: (the helper, the line of its call), innermost first
    calls: tuple[tuple[str, int | None], ...] = ()


@dataclass
class Kernel:
    name: str
    params: list[Param]
    registers: dict[str, str] = field(default_factory=dict)  # name -> declared type
    variables: list[Variable] = field(default_factory=list)  # module variables, then the kernel's
    call_params: dict[str, str] = field(default_factory=dict)  # .param declared in a call sequence
    body: list[Statement] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # label -> index of the next statement


@dataclass
class Function:
    """A ``.func`` defined in the module: ``body`` holds its parameters, registers, local
    variables, statements and labels; ``returns`` names its return parameters."""

    body: Kernel
    returns: list[str]


def parse_kernel(ptx: str, kernel_name: str, filename: str) -> tuple[Kernel, dict[str, Function]]:
    """The kernel named ``kernel_name`` (its lowered name) from PTX text, and the module's
    device functions by name (``inline_calls`` inlines those it calls)."""
    tokens, files = _tokenize(ptx)
    main_file = _main_file(files, filename)
    module_vars: list[Variable] = []
    functions: dict[str, Function] = {}
    kernel = None
    depth = 0
    i = 0
    while i < len(tokens):
        kind, text, _loc = tokens[i]
        entry, func = (_ENTRY.search(text), _FUNC.search(text)) if kind == "header" else (None, None)
        if entry or func:  # a .section's braces are only counted
            end = _block_end(tokens, i + 1)
            if entry and entry.group(1) == kernel_name:
                kernel = Kernel(kernel_name, _params(entry.group(2)))
                _fill_body(kernel, tokens[i + 2 : end], main_file)
            elif func and not entry:
                body = Kernel(func["name"], _params(func["params"] or ""))
                _fill_body(body, tokens[i + 2 : end], main_file)
                functions[body.name] = Function(body, [p.name for p in _params(func["returns"] or "")])
            i = end + 1
            continue
        if kind == "{" or kind == "}":
            depth += 1 if kind == "{" else -1
        elif kind == "stmt" and depth == 0:
            var = parse_variable(text)
            if var is not None:
                module_vars.append(var)
        i += 1
    if kernel is None:
        raise KeyError(f"kernel {kernel_name} not found in PTX")
    kernel.variables[:0] = module_vars
    return kernel, functions


def parse_variable(text: str) -> Variable | None:
    match = _VAR_DECL.match(text.strip())
    if match is None:
        return None
    type_ = match["type"]
    elem = TYPE_BYTES.get(type_, 1)
    count = match["count"]
    n = 1 if count is None else (int(count) if count else 0)
    init = _initializer(match["init"], type_, elem, n) if match["init"] else None
    return Variable(
        name=match["name"],
        space=match["space"],
        type=type_,
        size=n * elem,
        align=int(match["align"] or elem),
        init=init,
        extern=bool(match["extern"]),
    )


def _initializer(text: str, type_: str, elem: int, n: int) -> bytes:
    """The bytes the initialiser lists (no more: a large array's zeros are not stored)."""
    values = [v.strip() for v in text.strip().strip("{}").split(",") if v.strip()][:n]
    out = bytearray(len(values) * elem)
    for k, v in enumerate(values):
        raw = int(v[2:], 16) if v.startswith(("0f", "0F")) or v.startswith(("0d", "0D")) else int(v, 0)
        out[k * elem : (k + 1) * elem] = (raw & ((1 << (8 * elem)) - 1)).to_bytes(elem, "little")
    return bytes(out)


_LOC, _FILE = re.compile(r"\.loc\s"), re.compile(r"\.file\s")
_HEADER = re.compile(r"\.(version|target|address_size)\s")


def _tokenize(ptx: str, whole_lines: bool = True) -> tuple[list[tuple[str, str, Loc | None]], dict[int, str]]:
    """Statements, headers, scope braces and labels, each with the ``.loc`` in force (its
    functions named by what ``.debug_str`` holds for them). ``whole_lines``: a line that is one
    statement is taken whole, not through the general loop (``tests/emulator/test_decode_fast.py``
    compares the two)."""
    text = re.sub(r"/\*.*?\*/", " ", ptx, flags=re.S) if "/*" in ptx else ptx
    files: dict[int, str] = {}
    tokens: list[tuple[str, str, Loc | None]] = []
    loc: Loc | None = None
    chains: dict[tuple[int, ...], Loc] = {}
    plain: dict[str, tuple[tuple[int, ...], Loc]] = {}
    buf = ""
    for raw in text.splitlines():
        s = raw.split("//", 1)[0].strip()
        if not s:
            continue
        if s[0] == ".":  # the directives below all start with one
            if _LOC.match(s):
                loc = _loc(s, chains, plain)
                continue
            if _HEADER.match(s):
                continue
            if _FILE.match(s):
                parts = s.split(None, 2)
                files[int(parts[1])] = parts[2].split('"')[1] if '"' in parts[2] else parts[2]
                continue
        if (
            whole_lines
            and not buf
            and s[-1] == ";"
            and s.count(";") == 1
            and s[0] not in "{}"
            and ":" not in s
        ):
            stmt = s[:-1].strip()  # most lines: one whole statement (what the loop below makes of it)
            if stmt:
                tokens.append(("stmt", stmt, loc))
            continue
        while s:
            if not buf.strip() and s[0] in "{}":  # a scope (call sequence, inline asm, body)
                tokens.append((s[0], s[0], loc))
                s = s[1:].strip()
                continue
            if s == "{":  # the header of a function ends
                tokens.append(("header", buf.strip(), loc))
                buf = ""
                continue
            label = _LABEL.match(s) if ":" in s else None
            if label and not buf.strip():
                tokens.append(("label", label.group(1), loc))
                s = label.group(2)
                continue
            end = s.find(";")
            if end < 0:
                buf += " " + s
                break
            stmt = (buf + " " + s[:end]).strip()
            if stmt:
                tokens.append(("stmt", stmt, loc))
            buf = ""
            s = s[end + 1 :].strip()
    names = _debug_strings(text)
    renamed: dict[Loc | None, Loc | None] = {}  # statements share their .loc's
    for loc in {loc for _, _, loc in tokens}:
        renamed[loc] = _named(loc, names)
    return [(kind, stmt, renamed[loc]) for kind, stmt, loc in tokens], files


def _named(loc: Loc | None, names: dict[str, str]) -> Loc | None:
    """``loc`` with each function label replaced by the name it stands for."""
    return tuple((file, line, names.get(f, f)) for file, line, f in loc) if loc else loc


_DEBUG_STRING = re.compile(r"(\$L__info_string\d+):\s*\.b8\s+([\d,\s]+)")


def _debug_strings(text: str) -> dict[str, str]:
    """``.debug_str``'s strings by label: the mangled names of inlined functions."""
    return {
        label: bytes(int(b) for b in data.replace(",", " ").split()).split(b"\0")[0].decode(errors="replace")
        for label, data in _DEBUG_STRING.findall(text)
    }


def _loc(
    s: str, chains: dict[tuple[int, ...], Loc], plain: dict[str, tuple[tuple[int, ...], Loc]] | None = None
) -> Loc:
    """The (file, line) of a ``.loc``, then of each call site it is inlined at, innermost first
    (``plain``: the lines without ``inlined_at`` met so far, each with its site and chain).

    ``inlined_at`` names the call site by its own (file, line, column), which an earlier
    ``.loc`` placed, itself perhaps inlined (``block.sync()`` of cooperative groups is two
    levels deep in headers): ``chains`` holds each site's chain as the ``.loc`` lines give it.
    """
    if plain is not None and s in plain:  # a line again, without inlined_at: its chain is its own
        site, chain = plain[s]
        chains[site] = chain
        return chain
    parts = s.replace(",", " ").split()
    site = tuple(int(p) for p in parts[1:4])
    function = parts[parts.index("function_name") + 1] if "function_name" in parts else None
    chain: Loc = ((*site[:2], function),)
    if "inlined_at" in parts:
        k = parts.index("inlined_at")
        caller = tuple(int(p) for p in parts[k + 1 : k + 4])
        chain += chains.get(caller, ((*caller[:2], None),))
    elif plain is not None:
        plain[s] = (site, chain)
    chains[site] = chain
    return chain


def _main_file(files: dict[int, str], filename: str) -> int:
    for number, path in files.items():
        if path.replace("\\", "/").rsplit("/", 1)[-1] == filename:
            return number
    return min(files, default=1)


def _line(loc: Loc | None, main_file: int) -> int | None:
    """The innermost line of ``loc`` in the main file: the student's own line, or the call
    that inlined a header's code."""
    return next((line for file, line, _ in loc or () if file == main_file and line > 0), None)


def _calls(loc: Loc | None, main_file: int) -> tuple[tuple[str, int | None], ...]:
    """For a line of a helper of the main file that NVRTC inlined: (the helper, the line of
    its call), innermost first, as ``inline.py`` gives a ``__noinline__`` helper's."""
    frames = [(line, function) for file, line, function in loc or () if file == main_file and line > 0]
    return tuple(
        (readable(function), caller)
        for (_, function), (caller, _) in itertools.pairwise(frames)
        if function is not None
    )


def _block_end(tokens, start: int) -> int:
    depth = 0
    for j in range(start, len(tokens)):
        if tokens[j][0] == "{":
            depth += 1
        elif tokens[j][0] == "}":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced braces in PTX")


def _params(text: str) -> list[Param]:
    params = []
    for match in _PARAM.finditer(text):
        align, type_, name, count = match.groups()
        elem = TYPE_BYTES.get(type_, 1)
        size = elem * (int(count) if count else 1)
        params.append(Param(name, type_, size, int(align or elem)))
    return params


def _fill_body(kernel: Kernel, tokens, main_file: int) -> None:
    line, calls, last = None, (), None
    found: dict[Loc | None, tuple[int | None, Calls]] = {}  # a .loc's line and calls (loops revisit it)
    for kind, text, loc in tokens:
        if loc is not last:  # statements share their .loc's
            if loc not in found:
                here = _line(loc, main_file)
                found[loc] = (here, _calls(loc, main_file) if here else ())
            here, its_calls = found[loc]
            if here:
                line, calls = here, its_calls
        last = loc
        if kind == "label":
            kernel.labels[text] = len(kernel.body)
        elif kind == "stmt":
            _statement(kernel, text, line, calls)


def _statement(kernel: Kernel, text: str, line: int | None, calls=()) -> None:
    if text[:1] != ".":  # an instruction: most statements
        kernel.body.append(Statement(text, line, calls))
    elif text.startswith(".reg"):
        match = _REG_DECL.match(text)
        for name in match.group(2).split(","):
            _declare_registers(kernel, name.strip(), match.group(1))
    elif text.startswith(".param"):
        match = _PARAM.match(text)
        kernel.call_params[match.group(3)] = match.group(2)
    elif text.startswith((".local", ".shared", ".global", ".const", ".extern")):
        var = parse_variable(text)
        if var is not None:
            kernel.variables.append(var)
    # else .pragma, .maxntid and other performance hints: nothing to keep


def _declare_registers(kernel: Kernel, name: str, type_: str) -> None:
    match = _RANGE.match(name)
    if match:
        prefix = match.group(1)
        kernel.registers.update(dict.fromkeys([f"{prefix}{k}" for k in range(int(match.group(2)))], type_))
    else:
        kernel.registers[name] = type_


_MANGLED = re.compile(r"^_Z(N)?(?:[rVK]*)(\d.*)$")


def readable(name: str) -> str:
    """A function's name as its source spells it, from the Itanium mangled name NVRTC gives
    a C++ function (``_Z9load_tilePfPKfi``: ``load_tile``; ``_ZN2ns4loadEv``: ``ns::load``);
    an ``extern "C"`` name as it is."""
    match = _MANGLED.match(name)
    if match is None:
        return name
    parts, rest = [], match.group(2)
    while (length := re.match(r"\d+", rest)) is not None:
        end = length.end() + int(length.group(0))
        parts.append(rest[length.end() : end])
        if not match.group(1):  # not nested: one name
            break
        rest = rest[end:]
    return "::".join(parts) or name
