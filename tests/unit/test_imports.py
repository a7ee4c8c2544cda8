"""The module map's rules (docs/design.md), read from the source: one-way imports, no cycles,
backends that never reach into grading, grading that never asks a backend its name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.backends import NAMES

PACKAGE = Path(__file__).resolve().parents[2] / "autograder"
GRADING = {
    "cases",
    "spec",
    "performance",
    "pipeline",
    "checks",
    "compare",
    "model",
    "rubric",
    "sanitize",
    "results",
    "report",
    "cli",
    "vocabulary",
    "discovery",
    "gradescope_zip",
    "authoring",
    "resources",
    "ledger",
    "handout_profiles",
    "roofline",
    "class_report",
    "serve",
    "gpu_service",
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


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if n.startswith("autograder.backends")))
def test_backends_never_import_the_grading_layer(name):
    reached = {target.split(".")[1] for target in GRAPH[name]}
    assert not reached & GRADING, f"{name} imports {sorted(reached & GRADING)}"


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
    GRAPH["autograder.spec"] = GRAPH["autograder.spec"] | {"autograder.pipeline"}
    try:
        assert cycle_through("autograder.spec") is not None
    finally:
        GRAPH["autograder.spec"] -= {"autograder.pipeline"}
    tree = ast.parse('if backend.name == "gpu":\n    pass\n')
    assert any(isinstance(n, ast.Compare) and n.comparators[0].value in NAMES for n in ast.walk(tree))
    assert "autograder.cases" in imports(ast.parse("def f():\n    from autograder.cases import prepare\n"))


# jinja2 and matplotlib come with the batch extra (pyproject.toml) and only class-report uses them;
# fastapi and uvicorn with the serve extra, and only serve uses them
WITHOUT_THE_EXTRAS = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("jinja2", "matplotlib", "fastapi", "uvicorn"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
import autograder.cli, autograder.pipeline
extra = ("jinja2", "matplotlib", "ray", "rich", "fastapi", "uvicorn", "limits", "autograder.class_report",
         "autograder.serve")
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
