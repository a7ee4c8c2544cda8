"""The backend contract: what the grading pipeline hands a backend and what it gets back.

Two backends implement it: ``gpu`` (PyCUDA, ``gpu.py``) and ``emulator`` (the PTX
interpreter, ``emulator.py``). Scoring code never branches on which one ran: both take a
:class:`Launch` and return a :class:`LaunchResult`, and both report defects as
:class:`Finding` values. ``docs/backend-contract.md`` is the prose version of this module.

Failures the kernel causes are exceptions derived from :class:`BackendError`; their
``str()`` is the sentence a student reads. Anything else escaping a backend is a grader bug.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class Program:
    """What to compile: one CUDA source, one kernel in it, the ``-D`` defines."""

    source: str
    filename: str  # shown in compiler messages and findings, e.g. "window_sum.cu"
    kernel: str  # as written in the source; an NVRTC name expression resolves C++ names
    defines: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Buffer:
    """A device array argument. ``data`` is its full contents before the launch (1-D)."""

    name: str
    data: np.ndarray
    is_output: bool = False


@dataclass(frozen=True)
class Scalar:
    """A by-value kernel argument."""

    name: str
    value: int | float
    dtype: str = "int32"  # a numpy dtype name


Arg = Buffer | Scalar


@dataclass(frozen=True)
class Launch:
    """One kernel launch: a program, its geometry and its arguments in signature order."""

    program: Program
    grid: Dim3
    block: Dim3
    args: tuple[Arg, ...]
    shared_bytes: int = 0  # dynamic (extern __shared__) bytes
    time_limit_s: float = 20.0


# Finding kinds, and the rubric check each one belongs to.
FINDING_CHECKS: dict[str, str] = {
    "out_of_bounds_read": "bounds",
    "out_of_bounds_write": "bounds",
    "misaligned_access": "bounds",
    "barrier_divergence": "barriers",
    "deadlock": "barriers",
    "shared_race": "barriers",
    "uninitialized_shared_read": "barriers",
    "uninitialized_global_read": "bounds",  # compute-sanitizer initcheck (--sanitize) only
    "instruction_budget": "correctness",
}


@dataclass(frozen=True)
class Finding:
    """One diagnosed defect, located as precisely as the backend can."""

    kind: str  # a key of FINDING_CHECKS
    message: str  # the full sentence a student reads
    line: int | None = None  # source line in Program.filename
    thread: Dim3 | None = None
    block: Dim3 | None = None
    array: str | None = None  # argument name or shared variable name
    index: int | None = None  # element index into that array
    bound: int | None = None  # its number of elements
    others: int = 0  # how many other threads had the same finding

    @property
    def check(self) -> str:
        return FINDING_CHECKS[self.kind]


@dataclass
class Counters:
    """Event counts of one launch (emulator only), in total and per source line.

    Names: global_load_requests, global_load_bytes, global_load_values,
    global_load_sectors, the same four for global_store_*, shared_load_requests,
    shared_load_values, shared_load_wavefronts, shared_load_conflicts (extra wavefronts),
    the same four for shared_store_*, barriers, lane_instructions, warp_instructions, flops.
    A request is one warp-wide memory instruction; values count scalar elements.
    """

    totals: dict[str, int] = field(default_factory=dict)
    by_line: dict[int, dict[str, int]] = field(default_factory=dict)


@dataclass
class LaunchResult:
    outputs: dict[str, np.ndarray]  # every Buffer's contents after the launch, by name
    findings: list[Finding] = field(default_factory=list)
    counters: Counters | None = None
    stdout: str = ""  # captured printf output
    elapsed_ms: float | None = None  # device time of the launch (gpu backend only)


class BackendError(Exception):
    """A failure caused by the submission; ``str()`` is written for the student."""


class CompileError(BackendError):
    """The compiler rejected the source; ``log`` holds its messages with line numbers."""

    def __init__(self, log: str):
        super().__init__(f"compilation failed:\n{log}")
        self.log = log


class LaunchFailure(BackendError):
    """The launch crashed (illegal address, misaligned address, trap, ...)."""


class LaunchTimeout(BackendError):
    """The launch did not finish within ``Launch.time_limit_s``."""


class Unsupported(BackendError):
    """The emulator met PTX it cannot run; the message names the opcode and source line."""


class Backend(ABC):
    """A place to compile and run kernels. Instances are used from one thread."""

    name: str

    @abstractmethod
    def compile(self, program: Program) -> None:
        """Compile (and cache) ``program``; raise :class:`CompileError` on failure."""

    @abstractmethod
    def launch(self, launch: Launch) -> LaunchResult:
        """Run one launch on fresh device copies of its buffers."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release devices, worker processes and caches."""
