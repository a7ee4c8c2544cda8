"""The module map's rules (docs/design.md), read from the source: every module in a layer, each
layer importing only the layers below it that it names, no cycles, and no code above the backends
asking a backend its name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.contract import BACKEND_NAMES as NAMES

PACKAGE = Path(__file__).resolve().parents[2] / "autograder"
# Each layer of the package (docs/design.md's module map), from the bottom up, and what it may
# import besides itself: whole layers, or one named module of a layer it otherwise may not reach.
ROOT = {"autograder", "autograder.contract", "autograder.device", "autograder.errors", "autograder.feedback"}
TOP = {"autograder.cli", "autograder.__main__"}  # and any module of a package autograder/cli/
ALLOWED = {
    "root": set(),
    "emulator": {"root"},
    "backends": {"root", "emulator"},
    # policy admits the headers the compiler supplies, and only their names
    "course": {"root", "autograder.backends.compiler"},
    # the sanitizer's findings collapse as the emulator's do (one per kind, line and array)
    "grading": {"root", "backends", "course", "autograder.emulator.findings"},
    "profile": {"root", "emulator", "backends", "course", "grading"},
    "delivery": {"root", "backends", "course", "grading", "profile"},
    "top": {"root", "emulator", "backends", "course", "grading", "profile", "delivery"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {module_name(path): ast.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}


def imports(tree: ast.Module) -> set[str]:
    """Every autograder module imported anywhere in ``tree`` (inside functions too).

    ``from package import module`` imports the module; ``from module import name``, the module.
    """
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in SOURCES else node.module)
    return found & SOURCES.keys()


GRAPH = {name: imports(tree) - {name} for name, tree in SOURCES.items()}


def layer(name: str) -> str | None:
    """The layer ``name`` belongs to, or None for a module that fits no layer."""
    if name in ROOT:
        return "root"
    if name in TOP or name.startswith("autograder.cli."):
        return "top"
    package = name.split(".")[1]
    return package if package in ALLOWED and package not in ("root", "top") else None


def forbidden(name: str, graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``name`` its layer may not make."""
    own, allowed = layer(name), ALLOWED[layer(name)]
    return sorted(t for t in graph[name] if layer(t) != own and layer(t) not in allowed and t not in allowed)


def cycle_through(start: str) -> list[str] | None:
    """A path of imports from ``start`` back to itself, if there is one."""
    stack, seen = [(start, [start])], set()
    while stack:
        name, path = stack.pop()
        for target in GRAPH[name]:
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_no_import_cycle(name):
    assert cycle_through(name) is None, " -> ".join(cycle_through(name))


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_every_module_belongs_to_a_layer_and_imports_only_what_it_may(name):
    assert layer(name) is not None, (
        f"{name} fits no layer: put it in one of {sorted(ALLOWED)} (docs/design.md)"
    )
    assert not forbidden(name, GRAPH), f"{name} ({layer(name)}) imports {forbidden(name, GRAPH)}"


@pytest.mark.parametrize("name", sorted(n for n in SOURCES if not n.startswith("autograder.backends")))
def test_grading_asks_capabilities_not_backend_names(name):
    compared = [
        f"line {node.lineno}"
        for node in ast.walk(SOURCES[name])
        if isinstance(node, ast.Compare)
        for operand in (node.left, *node.comparators)
        if isinstance(operand, ast.Constant) and operand.value in NAMES
    ]
    assert not compared, f"{name} compares a backend name at {', '.join(compared)}"


def test_the_checks_above_catch_what_they_look_for():
    GRAPH["autograder.course.spec"] = GRAPH["autograder.course.spec"] | {"autograder.grading.pipeline"}
    try:
        assert cycle_through("autograder.course.spec") is not None
    finally:
        GRAPH["autograder.course.spec"] -= {"autograder.grading.pipeline"}
    assert layer("autograder.scratch") is None and layer("autograder.grading.scratch") == "grading"
    upward = {
        **GRAPH,
        "autograder.emulator.ops": GRAPH["autograder.emulator.ops"] | {"autograder.grading.checks"},
    }
    assert forbidden("autograder.emulator.ops", upward) == ["autograder.grading.checks"]
    sideways = {**GRAPH, "autograder.course.spec": {"autograder.backends.registry"}}
    assert forbidden("autograder.course.spec", sideways) == ["autograder.backends.registry"]
    tree = ast.parse('if backend.name == "gpu":\n    pass\n')
    assert any(isinstance(n, ast.Compare) and n.comparators[0].value in NAMES for n in ast.walk(tree))
    assert "autograder.course.cases" in imports(
        ast.parse("def f():\n    from autograder.course.cases import prepare\n")
    )


# jinja2 and matplotlib come with the batch extra (pyproject.toml) and only class-report uses them;
# fastapi and uvicorn with the serve extra, and only serve uses them
WITHOUT_THE_EXTRAS = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("jinja2", "matplotlib", "fastapi", "uvicorn"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
import autograder.cli, autograder.grading.pipeline
extra = ("jinja2", "matplotlib", "ray", "rich", "fastapi", "uvicorn", "limits",
         "autograder.delivery.class_report", "autograder.delivery.serve")
print(sorted(m for m in extra if m in sys.modules))
autograder.cli.main(sys.argv[1:])
"""


@pytest.mark.parametrize(
    "command, message",
    [
        (["class-report", "{tmp}"], "the class report needs jinja2: pip install 'cuda-autograder[batch]'"),
        (
            ["serve", "--token-file", "{tmp}/tokens"],
            "autograder serve needs uvicorn: pip install 'cuda-autograder[serve]'",
        ),
    ],
)
def test_the_grading_commands_need_nothing_of_the_batch_or_serve_extras(tmp_path, command, message):
    (tmp_path / "tokens").write_text("t" * 20 + "\n")
    arguments = [word.format(tmp=tmp_path) for word in command]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_EXTRAS, *arguments], capture_output=True, text=True
    )
    assert done.stdout.splitlines()[0] == "[]", done.stdout + done.stderr
    assert done.returncode == 1
    assert message in done.stderr


# what `autograder grade` loads in its own process on the emulator, before any worker starts
THE_GRADERS_OWN = """
import sys
import autograder.cli.grading
from autograder.backends import registry
registry.select_backend("emulator").close()
print(sorted(m for m in sys.modules if m.startswith("autograder.emulator")))
"""


def test_the_graders_process_loads_none_of_the_emulators_machine():
    """The grader's process reads the emulator backend's capabilities and collapses findings as
    the emulator does (``findings.py``), but runs no launch: its worker does. The machine's modules
    (about 90 ms of every grading's CPU in the grader) load there alone; the package's ``emulate``
    is still the machine's, loaded when first asked for."""
    done = subprocess.run([sys.executable, "-c", THE_GRADERS_OWN], capture_output=True, text=True)
    assert done.stdout.split("\n")[0] == "['autograder.emulator', 'autograder.emulator.findings']", (
        done.stdout + done.stderr
    )
    from autograder.emulator import emulate, machine

    assert emulate is machine.emulate
