"""The reference kernel's counts on a case, kept on the machine: each case run once per machine.

Every grading on the emulator runs the course's reference kernel on each case its student's
kernel runs: the student's launches may execute at most a multiple of the reference's
instructions (``pipeline.WORK_MULTIPLE``), and a traffic item divides the student's counts by
the reference's. That is half of a grading's emulator time, spent on the same answer each
time: the reference's counter totals depend on its program and the case (the launch's
geometry, its buffers' sizes and types, its scalars), not on the input values drawn for it,
as a handout's recorded counters do (``reference_counters``, which tests that grading with
other inputs than those recorded gives the grader's scores). So ``CaseRunner`` asks here first
and keeps what the reference's run counted: the listed cases, which every grading runs, are run
once per machine; a drawn case (from the grading's secret seed, its own in a batch) runs again
unless a grading at that seed did, as a regrade does. Gradescope's ``setup.sh`` and the
``Dockerfile`` run ``selfcheck``, which fills the image's cache with the listed cases, so that a
grading in a fresh container of the image runs the reference on its drawn cases only.

Kept only from a run that completed, matched the numpy reference and reported nothing, on a
backend that names the code that counts (``Capabilities.counting_version``: the emulator's
digest of its own sources; a backend without one, a test's stand-in, is never kept or asked).
The key is a digest of the reference's compile (``compile_cache.key``: its source, defines,
target and the compiler's identity), that counting version, and the launch without its
values; only while the machine keeps that compile, so that the key names the PTX that ran.
The counts live in the machine's compile cache (``compile_cache``, ``$AUTOGRADER_COMPILE_CACHE``,
``off`` for none), as JSON.
"""

from __future__ import annotations

import hashlib
import json

from autograder.backends import compile_cache
from autograder.backends.compiler import EMULATOR_ARCH, compiler_identity
from autograder.contract import Backend, Buffer, Counters, Launch
from autograder.grading.compare import CaseOutcome

KIND = "reference-counts"  # the record's kind in the cache, beside the compiler's


def key(counting_version: str, launch: Launch) -> str | None:
    """The digest of ``launch`` of a reference counted by ``counting_version``: everything but its
    values; None when the machine keeps no compile of its program, whose digest then would not
    say which PTX ran (an NVRTC other than the pinned package's: ``compiler._keeps_answers``)."""
    compiled = compile_cache.key(launch.program, EMULATOR_ARCH, compiler_identity())
    if not compile_cache.holds(compiled):
        return None
    args = [
        [a.name, a.data.dtype.str, a.data.size, a.is_output]
        if isinstance(a, Buffer)
        else [a.name, a.value, a.dtype]
        for a in launch.args
    ]
    shape = [launch.grid, launch.block, launch.shared_bytes, launch.cooperative, args]
    what = [KIND, compiled, counting_version, shape]
    return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()


def load(backend: Backend, launch: Launch) -> Counters | None:
    """The reference's counter totals on ``launch`` as ``backend`` counts them, kept on this
    machine; None when none are (or ``backend`` names no counting version)."""
    digest = _digest(backend, launch)
    record = compile_cache.load(digest) if digest else None
    if not record or record.get("kind") != KIND or not isinstance(record.get("totals"), dict):
        return None
    return Counters(totals=dict(record["totals"]))


def store(backend: Backend, launch: Launch, outcome: CaseOutcome) -> None:
    """Keep the counter totals of ``outcome``, the reference's run of ``launch`` on ``backend``,
    when it completed, was correct and reported nothing."""
    clean = outcome.correct and not outcome.findings and not outcome.grader_fault
    if not clean or outcome.counters is None or not outcome.counters.totals:
        return
    digest = _digest(backend, launch)
    if digest:
        compile_cache.store(digest, {"kind": KIND, "totals": outcome.counters.totals})


def _digest(backend: Backend, launch: Launch) -> str | None:
    version = backend.capabilities.counting_version
    return key(version, launch) if version else None
