"""What the docs say about the code, held to the code: a page that names a module, a path, a
function or a finding kind that is not there fails here, not in a newcomer's hands.

- ``docs/design.md``'s module map lists every module of the package once, each under the layer
  ``test_imports.layer`` puts it in;
- ``docs/backend-contract.md``'s table of finding kinds is ``FINDING_CHECKS``, and design.md's
  rubric.yaml example loads;
- every path of this repository a page cites in backticks exists, and every ``module.name``
  it cites of the package is defined there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from autograder.backends.registry import CLASSES
from autograder.contract import BACKEND_NAMES as NAMES
from autograder.contract import FINDING_CHECKS
from autograder.course.rubric import load_rubric
from autograder.course.spec import load_specs
from tests.unit.test_imports import PACKAGE, layer, module_name

ROOT = PACKAGE.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAP_START = "## Module map"
ROW = re.compile(r"^\|\s*`(autograder/[\w/]+\.py)`\s*\|(.*)$", re.M)
TICKED = re.compile(r"`([^`\s]+)`")
# The folders of this project's own code and docs; assignments/, reference/ and starter/ are a
# course's layout, which pages cite with placeholders (`reference/NAME.cu`).
OWN = ("autograder/", "bench/", "tests/", "docs/", ".ci/")
FILE_SUFFIXES = {"py", "md", "json", "sh", "h", "zip", "cu", "yaml", "yml", "csv", "txt", "html", "log"}
NOT_PYTHON = {"mma.sync"}  # a PTX instruction, named like the emulator's mma.py
RUBRIC_SECTIONS = {"limits": "Limits"}  # rubric.yaml's `limits.case_s`, beside emulator/limits.py


def section(text: str, title: str) -> str:
    """The text under the ``## title`` heading, up to the next one."""
    start = text.index(title) + len(title)
    following = text.find("\n## ", start)
    return text[start : following if following >= 0 else len(text)]


def module_map(text: str) -> dict[str, list[str]]:
    """design.md's module map: each layer's name (its title, lower case) and its modules' paths."""
    layers = {}
    for block in re.split(r"^\*\*", section(text, MAP_START), flags=re.M)[1:]:
        layers[block.split("**")[0].lower()] = [path for path, _ in ROW.findall(block)]
    return layers


def package_modules() -> set[str]:
    """Every module of the package that the map must list (``__init__`` and ``__main__`` may be)."""
    paths = (p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py"))
    return {p for p in paths if Path(p).stem not in ("__init__", "__main__")}


def map_problems(layers: dict[str, list[str]]) -> list[str]:
    listed = [path for paths in layers.values() for path in paths]
    twice = sorted({path for path in listed if listed.count(path) > 1})
    missing = sorted(package_modules() - set(listed))
    absent = sorted(path for path in listed if not (ROOT / path).is_file())
    misplaced = sorted(
        f"{path} is listed under {name} but is of {layer(module_name(ROOT / path))}"
        for name, paths in layers.items()
        for path in paths
        if (ROOT / path).is_file() and layer(module_name(ROOT / path)) != name
    )
    return (
        [f"{path} is listed twice" for path in twice]
        + [f"{path} is not in the module map" for path in missing]
        + [f"{path} is in the module map but does not exist" for path in absent]
        + misplaced
    )


DESIGN = (ROOT / "docs/design.md").read_text()
LAYERS = module_map(DESIGN)


def test_the_module_map_lists_every_module_once_and_only_modules_that_exist():
    assert not map_problems(LAYERS), "\n".join(map_problems(LAYERS))


def test_the_map_checks_catch_a_missing_module_a_made_up_one_and_one_in_the_wrong_layer():
    pipeline = "autograder/grading/pipeline.py"
    without = {name: [p for p in paths if p != pipeline] for name, paths in LAYERS.items()}
    assert map_problems(without) == [f"{pipeline} is not in the module map"]
    invented = {**LAYERS, "root": [*LAYERS["root"], "autograder/nowhere.py"]}
    assert map_problems(invented) == ["autograder/nowhere.py is in the module map but does not exist"]
    moved = {**without, "course": [*LAYERS["course"], pipeline]}
    assert map_problems(moved) == [f"{pipeline} is listed under course but is of grading"]


def test_a_new_backend_is_named_where_it_is_classed():
    """design.md: a backend needs its line in ``CLASSES`` and its name in ``NAMES``."""
    assert set(NAMES) == {"auto", *CLASSES}


def test_backend_contract_lists_every_finding_kind_with_its_check():
    rows = re.findall(r"^\s*\| `(\w+)` \| `(\w+)` \|", (ROOT / "docs/backend-contract.md").read_text(), re.M)
    assert dict(rows) == FINDING_CHECKS


def cited(doc: Path) -> list[tuple[int, str]]:
    """(line number, token) of every backticked token of ``doc``."""
    lines = doc.read_text().splitlines()
    return [(n, token) for n, line in enumerate(lines, 1) for token in TICKED.findall(line)]


OWN_FILES = [p.relative_to(ROOT).as_posix() for folder in OWN for p in (ROOT / folder).rglob("*.py")]
INNER_FOLDERS = {
    p.parent.relative_to(ROOT / top).parts[0] for top in OWN for p in (ROOT / top).rglob("*/*.py")
}


def path_exists(token: str) -> bool | None:
    """Whether the repository path ``token`` exists; None when ``token`` is no path of this
    repository (a course's file, a generated one, another package's).

    A path starting at one of our folders is looked up as it is (``<name>`` or ``*`` matches any
    part); a bare ``x.py`` or ``backends/x.py`` is a file of ours ending so.
    """
    path = token.split("::")[0]
    if path.startswith(OWN):
        pattern = re.sub(r"<[^>]*>", "*", path).rstrip("/")
        return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / pattern).exists()
    if re.fullmatch(r"[\w/]+\.py", path) and ("/" not in path or path.split("/")[0] in INNER_FOLDERS):
        return any(f == path or f.endswith("/" + path) for f in OWN_FILES)
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_path_a_page_cites_exists(doc):
    missing = [f"line {n}: {token}" for n, token in cited(doc) if path_exists(token) is False]
    assert not missing, f"{doc.name} cites paths that do not exist: {missing}"


def defined_names(tree: ast.Module) -> set[str]:
    """What a module defines or imports at its top level."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def class_names(cls: ast.ClassDef) -> set[str]:
    """A class's methods, fields and class attributes, and what its methods set on ``self``."""
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names


def namespaces() -> dict[str, set[str]]:
    """Every name a page may write before a dot: each module by any tail of its dotted name
    (``limits``, ``emulator.limits``), each class by its name, with what each defines."""
    spaces: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = defined_names(tree)
        if path.name == "__init__.py":
            names |= {p.stem for p in path.parent.glob("*.py")} | {p.name for p in path.parent.iterdir()}
        parts = module_name(path).split(".")
        for k in range(1, len(parts) + 1):
            spaces.setdefault(".".join(parts[-k:]), set()).update(names)
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            spaces.setdefault(cls.name, set()).update(class_names(cls))
    for section_, cls in RUBRIC_SECTIONS.items():
        spaces[section_] |= spaces[cls]
    return spaces


NAMESPACES = namespaces()


def undefined(token: str) -> bool:
    """Whether ``token`` (``performance.with_work``, ``CaseRunner.timings()``) names a module or
    class of the package and something it does not define."""
    dotted = token.removesuffix("()")
    prefix, _, name = dotted.rpartition(".")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", dotted) or name in FILE_SUFFIXES or dotted in NOT_PYTHON:
        return False
    return prefix in NAMESPACES and name not in NAMESPACES[prefix]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_module_name_a_page_cites_is_defined(doc):
    wrong = [f"line {n}: {token}" for n, token in cited(doc) if undefined(token)]
    assert not wrong, f"{doc.name} cites names the code does not define: {wrong}"


def test_the_citation_checks_catch_what_they_look_for():
    assert path_exists("autograder/nowhere.py") is False
    assert path_exists("bench/references/*.log") and path_exists("emulator/limits.py")
    assert path_exists("reference/NAME.cu") is None and path_exists("ray/_private/x.py") is None
    assert undefined("performance.with_floor") and undefined("CaseRunner.replay()")
    assert not undefined("performance.with_work") and not undefined("limits.case_s")


def test_design_md_rubric_example_loads(tmp_path):
    """The rubric.yaml of design.md is one the grader accepts, against the shipped specs."""
    example = re.search(r"## rubric.yaml\n\n```yaml\n(.*?)```", DESIGN, re.S).group(1)
    (tmp_path / "rubric.yaml").write_text(example)
    specs = load_specs(ROOT)
    rubric = load_rubric(tmp_path / "rubric.yaml", {"window_sum": specs["window_sum"].cases})
    assert [item.check for item in rubric.assignments["window_sum"]][-1] == "performance"
