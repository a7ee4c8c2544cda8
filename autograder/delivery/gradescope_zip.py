"""``autograder gradescope``: the autograder.zip of Gradescope's standard upload, for some assignments.

At the zip's root, as Gradescope asks: ``setup.sh`` (run once when Gradescope builds the
image) and ``run_autograder`` (run for each submission), both this checkout's own. Beside them
the package's source (``autograder/``, ``pyproject.toml``, ``README.md``) that ``setup.sh``
installs, and the course cut down to the named assignments: ``assignments/<name>/``,
``reference/<name>.cu`` (traffic items compare with it; students never see the image),
``starter/<name>.cu``, a ``rubric.yaml`` of those assignments only, and ``assignments.txt``,
which tells ``run_autograder`` to grade every one of them, submitted or not, so the total is
the rubric's for every student. With a GPU service (``--gpu-url``), ``gpu-service.json`` holds
its URL and the course's token, read by ``grade`` from the course root (docs/gpu-service.md).
Two builds of the same files are the same bytes (``packaging``). docs/gradescope.md says how
to upload it.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from autograder.course.folder import Course
from autograder.delivery import gpu_service, packaging

SCRIPTS = ("setup.sh", "run_autograder")  # at the zip's root, executable
ASSIGNMENTS_FILE = "assignments.txt"  # read by run_autograder


def build(
    course: Course,
    names: list[str],
    out: Path,
    checkout: Path = packaging.CHECKOUT,
    service: gpu_service.Service | None = None,
) -> list[str]:
    """Write the zip for ``names`` (known assignments of ``course``) to ``out``, with ``service``'s
    URL and token when given; return its entries."""
    names = packaging.in_rubric_order(course, names)
    entries = {name: (checkout / name, 0o755) for name in SCRIPTS}
    entries |= packaging.grader_package(checkout) | {"README.md": (checkout / "README.md", 0o644)}
    for name in names:
        entries |= packaging.tree(course.root / "assignments" / name, f"assignments/{name}")
        for folder in ("reference", "starter"):
            entries[f"{folder}/{name}.cu"] = (course.root / folder / f"{name}.cu", 0o644)
    contents = packaging.read(entries)
    contents["rubric.yaml"] = (packaging.rubric_of(course, names, "gradescope").encode(), 0o644)
    contents[ASSIGNMENTS_FILE] = (_assignments_file(names).encode(), 0o644)
    if service:  # the token: readable by the grader (root on Gradescope) alone
        contents[gpu_service.CONFIG_FILE] = (json.dumps(asdict(service), indent=1).encode() + b"\n", 0o600)
    packaging.write_zip(out, contents)
    return sorted(contents)


def _assignments_file(names: list[str]) -> str:
    return (
        "# run_autograder grades each of these assignments, submitted or not, so that every\n"
        "# submission's total is the rubric's (written by `autograder gradescope`).\n"
        + "".join(f"{name}\n" for name in names)
    )
