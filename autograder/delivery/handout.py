"""``autograder handout``: what students get: starters, handouts, cases and the grader, no solution.

The course cut down to the named assignments, which ``autograder check`` grades on its own:
``README.md`` (how to install the grader and check a kernel, written here), the grader's
source (``autograder/``, ``pyproject.toml``: ``pip install .``), ``assignments/<name>/`` (the
handout and the spec with its cases), ``starter/<name>.cu``, a ``rubric.yaml`` of those
assignments, and ``reference/<name>.counters.json``: the reference kernel's counter totals on
every case the emulator runs (``reference_counters``), so traffic items score as the grader
scores them: the cases each group lists, and those it draws at the handout's own seed
(``draws_seed``: from the spec, never a seed a grading draws), not the grading's secret ones.
Never the reference's source, PTX or binary (tests/delivery/test_handout.py looks for each).
Performance items time the reference kernel on a GPU: ``check`` says that the course's grader
measures them.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from autograder.backends.registry import Backends
from autograder.course.folder import Course
from autograder.delivery import packaging
from autograder.feedback import two_decimals
from autograder.grading import pipeline, reference_counters


def build(
    course: Course, names: list[str], out: Path, backends: Backends, checkout: Path = packaging.CHECKOUT
) -> list[str]:
    """Write the handout of ``names`` to ``out`` (a folder, or a zip if it ends in .zip); its files.

    The grader's source comes from ``checkout``; ``backends.safety`` (the emulator) runs the
    reference kernels to record their counters.
    """
    names = packaging.in_rubric_order(course, names)
    entries = packaging.grader_package(checkout)
    for name in names:
        entries |= packaging.tree(course.root / "assignments" / name, f"assignments/{name}")
        entries[f"starter/{name}.cu"] = (course.root / "starter" / f"{name}.cu", 0o644)
    contents = packaging.read(entries)
    contents["rubric.yaml"] = (packaging.rubric_of(course, names, "handout").encode(), 0o644)
    contents["README.md"] = (readme(course, names).encode(), 0o644)
    for name in names:
        counters = reference_counters.text(record(course, name, backends))
        contents[f"reference/{name}.counters.json"] = (counters.encode(), 0o644)
    packaging.write(out, contents)
    return sorted(contents)


def record(course: Course, name: str, backends: Backends) -> dict:
    """The reference kernel's counters on every case the emulator runs for ``name``'s items."""
    source = course.reference_source(name)
    if not source.is_file():
        raise packaging.BuildError(f"cannot record the reference's counters: {source} is missing")
    runner = pipeline.CaseRunner(
        course.specs[name],
        {"student": None, "reference": source.read_text(encoding="utf-8")},
        backends,
        draws_seed(course, name),  # the counts do not depend on the inputs (reference_counters)
        course.rubric.limits.case_s,
        math.inf,
    )
    groups = reference_counters.needed_groups(course.rubric.assignments[name])
    try:
        outcomes = {g: runner.outcomes("reference", g) for g in groups}
        return reference_counters.document(name, outcomes, runner.secret)
    except ValueError as e:
        raise packaging.BuildError(str(e)) from e


def draws_seed(course: Course, name: str) -> int:
    """The seed the handout of ``name`` draws its cases at: from its spec's text, so that two
    handouts of the same course are the same bytes, and with bit 63 set, so that it is never a
    grading's secret seed (``reference_counters.is_handout_seed``): what the handout's drawn sizes
    show says nothing of those a grading draws."""
    text = (course.root / "assignments" / name / "spec.py").read_bytes()
    digest = hashlib.sha256(b"handout draws/" + name.encode() + b"/" + text).digest()
    return int.from_bytes(digest[:8], "little") | reference_counters.HANDOUT_SEED_BIT


def readme(course: Course, names: list[str]) -> str:
    """The handout's front page: what is in it, how to install the grader, how to check a kernel."""
    rows = "".join(
        f"| `{name}` | [handout](assignments/{name}/README.md) | `starter/{name}.cu` | "
        f"{two_decimals(sum(item.points for item in course.rubric.assignments[name]))} |\n"
        for name in names
    )
    first = names[0]
    return f"""# {course.rubric.course}: {", ".join(names)}

| assignment | read | start from | points |
|---|---|---|---|
{rows}
## Set up, once

In this folder, make a virtual environment and install the grader into it:

```console
python3 -m venv .venv
. .venv/bin/activate
python3 -m pip install .
```

This installs `autograder`, the course's own grader, in `.venv` and nowhere else. A plain
`pip install .` outside a virtual environment fails on Debian and Ubuntu with
`error: externally-managed-environment`: their Python belongs to the system (PEP 668). There,
`python3 -m venv` needs the `python3-venv` package first: `sudo apt install python3-venv`. On
Windows, activate with `.venv\\Scripts\\activate` instead. In every new terminal, activate it
again (`. .venv/bin/activate`) before using `autograder`.

The grader compiles CUDA with NVRTC from pip, so it needs neither a GPU nor a CUDA
installation: Linux or Windows on x86-64, or Linux on arm64 (on a Mac, use a Linux container
or a lab machine). With an NVIDIA GPU and its driver, `python3 -m pip install '.[gpu]'` adds
PyCUDA, and kernels then run on the GPU.

## Check a kernel before you submit it

```console
autograder check starter/{first}.cu
```

Run it in this folder with `.venv` activated (or pass `--course` with this folder's path). It
grades the file as the course's grader does: the same cases with fresh random inputs, the same
rubric, every item's feedback. Without a GPU your kernel runs on the grader's emulator, which
also checks every memory access, every `__syncthreads()` and the memory traffic it counts
against the reference kernel's (`reference/<name>.counters.json` holds the reference's counts,
not its code). Speed against the reference kernel is measured only when the course grades your
submission on a GPU: `check` says so for those items.

Submit each kernel as `<assignment>.cu` (for example `{first}.cu`).
"""
