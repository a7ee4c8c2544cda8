"""The backend contract: what the grading pipeline hands a backend and what it gets back.

A backend compiles a :class:`Program`, runs a :class:`Launch` into a :class:`LaunchResult`
(outputs, :class:`Finding` values, :class:`Counters`), may time a kernel against the
reference (:class:`TimingRequest` into :class:`Timing`), and says what it can do in its
:class:`Capabilities`. Grading code asks those capabilities, never a backend's name, so a
new backend is one new module. Two implement it today: ``gpu`` (PyCUDA, ``gpu.py``) and
``emulator`` (the PTX interpreter, ``emulator.py``). ``docs/backend-contract.md`` is the
prose version of this module.

This module is the contract's vocabulary too: the finding kinds (and the rubric check each
counts against) and the counter names, each defined once, here.

Failures the kernel causes are exceptions derived from :class:`BackendError`; their
``str()`` is the sentence a student reads. Anything else escaping a backend is a grader bug.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from autograder.errors import AutograderError

Dim3 = tuple[int, int, int]

BACKEND_NAMES = ("auto", "gpu", "emulator")  # what --backend and a rubric's backend: accept


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
    # Lane instructions after which a backend that counts them ends the launch with an
    # ``instruction_budget`` finding (None: the backend's own budget); others ignore it.
    instruction_limit: int | None = None
    # A cooperative launch (cuLaunchCooperativeKernel): every block resident at once, so that
    # cooperative_groups' grid.sync() works; a grid larger than the GPU holds is refused.
    cooperative: bool = False


# What a byte nobody wrote reads as, on every backend: the emulator's memory outside an
# allocation and its fresh shared memory, and the GPU backend's canary zones around each buffer.
# A kernel that reads just past an array (a[n], n < 64 KiB past the end) therefore computes the
# same bits on both, and gets the same correctness verdict: 0xFF bytes are a NaN (float, half,
# double) or -1 (signed), which shows in the outputs. The GPU's canaries then miss a write of
# 0xFF bytes (an int -1) past an array; the emulator's bounds check, run on every grading, does not.
UNDEFINED_BYTE = 0xFF

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


_TRAFFIC = (
    ("global", ("requests", "bytes", "values", "sectors")),
    ("shared", ("requests", "bytes", "values", "wavefronts", "conflicts")),
)
# Every name a Counters total may have (and a rubric's traffic metric may name).
COUNTER_NAMES = (
    *(f"{space}_{kind}_{what}" for space, whats in _TRAFFIC for kind in ("load", "store") for what in whats),
    "barriers",
    "lane_instructions",
    "warp_instructions",
    "flops",
)
# The counters the grading derives from bytes: each ``*_values`` is its ``*_bytes`` over the size
# of the assignment's element (``Spec.value_bytes``), in ``ledger.graded_totals``, for the traffic
# items and the ledger. A backend's own ``*_values`` (the emulator's count of each instruction's
# elements of its own type) are never graded: 16 bytes read as ``ld.v2.u64`` are 2 of those and
# 4 floats of the assignment's, the same traffic as ``ld.v4.f32``.
VALUES_FROM_BYTES = {
    f"{space}_{kind}_values": f"{space}_{kind}_bytes"
    for space in ("global", "shared")
    for kind in ("load", "store")
}


@dataclass
class Counters:
    """Event counts of one launch, in total and per source line; keys are :data:`COUNTER_NAMES`.

    global_load_requests, global_load_bytes, global_load_values, global_load_sectors, the
    same four for global_store_*, shared_load_requests, shared_load_bytes, shared_load_values,
    shared_load_wavefronts, shared_load_conflicts (extra wavefronts), the same five for
    shared_store_*, barriers, lane_instructions, warp_instructions, flops. A request is one
    warp-wide memory instruction; bytes are what its active lanes move, whatever the type they
    move them as; sectors and wavefronts follow from the addresses and those bytes. Values, as
    a backend reports them, count elements of each instruction's own type (informative only:
    what is graded or shown in the ledger is bytes over the assignment's element size,
    :data:`VALUES_FROM_BYTES`).
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


# The timing's finest precision: the relative standard error of a ratio at which its repeats end,
# unless the request asks for less (a grading asks what its item's score needs, ``performance.Scoring``)
PRECISE_SPREAD = 0.0008


@dataclass(frozen=True)
class TimingRequest:
    """What to time: the student's launches (one per input set) and the reference program.

    The reference is compiled with the same defines and launched with the same arguments.
    Outputs of every timed launch are checked against the reference's on the same inputs,
    within ``tolerance_factor`` times the spec's tolerance (two float32 kernels each within
    the spec's tolerance of float64).
    """

    student: tuple[Launch, ...]  # same program and geometry, fresh inputs, poisoned outputs
    reference: Program
    case: Mapping[str, int | float]
    rtol: float
    atol: float
    tolerance_factor: float = 2.0
    min_repeats: int = 30
    max_repeats: int = 3000
    target_spread: float = PRECISE_SPREAD  # relative standard error of the ratio that ends the repeats
    budget_s: float = 20.0
    # an L2 flush before every launch; None: twice the device's L2 (on the H200, 120 MiB: the same
    # medians as 256 MiB, in 10-15 % less of a short kernel's session, bench/results/timing-spread.md)
    flush_bytes: int | None = None
    # rounds queued on the GPU at a time (gpu_timing): 2, the next one running while the host judges
    # one; 1, the GPU idle while it does (as until 2026-12-03)
    rounds_in_flight: int = 2
    # the ratios between which the score changes (the item's full_at and zero_at): the repeats also
    # end once the ratio is known to lie below the first or above the second (``gpu_timing.stop_reason``),
    # where more launches could not change the score; None: only ``target_spread`` ends them
    scored_between: tuple[float, float] | None = None

    @property
    def limit_s(self) -> float:
        """How long the grader waits for the answer: the budget, warm-up and uploads."""
        return self.budget_s + 2 * sum(launch.time_limit_s for launch in self.student) + 60


@dataclass(frozen=True)
class Timing:
    """One case's interleaved timing of student and reference kernel."""

    case: Mapping[str, int | float]
    student_ms: float  # median
    reference_ms: float  # median
    student_spread: float  # relative standard error of the median
    reference_spread: float
    repeats: int  # timed launches of each kernel
    input_sets: int
    device: str  # the device's name, e.g. "NVIDIA H200"
    clocks: Mapping[str, str] = field(default_factory=dict)  # e.g. {"sm_mhz": "1980", ...}
    floor_ms: float | None = None  # the physical floor; set by the grading side, which knows the work
    work_flops: float | None = None  # the spec's flops on this case (the roofline's measured point); ditto
    wrong: str | None = None  # the first timed launch whose outputs were wrong, described
    # the repeats ended with the ratio known to lie outside the request's ``scored_between``, short
    # of ``target_spread``: enough for the score, not for the ratio's last digits
    decided: bool = False

    @property
    def ratio(self) -> float:
        return self.student_ms / self.reference_ms

    @property
    def ratio_spread(self) -> float:
        """The ratio's relative standard error: both medians' added in quadrature (the stop rule's)."""
        return math.hypot(self.student_spread, self.reference_spread)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; grading asks these, never the backend's name."""

    measures_time: bool = False  # ``time()`` gives device times (performance items with ``metric: time``)
    # every out-of-bounds access, barrier and race is a finding; counters (instructions too, so
    # it honours Launch.instruction_limit)
    sees_every_access: bool = False
    runs_natively: bool = False  # kernels run on a real GPU (so compute-sanitizer can watch them)
    # the code that counts (the emulator's: a digest of its sources): two backends with the same
    # version count a launch alike, so a reference's counts may be kept (grading/reference_cache.py);
    # None: its counts are never kept
    counting_version: str | None = None


class BackendError(AutograderError):
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

    name: str  # for people: reports say which backend graded
    capabilities: Capabilities = Capabilities()

    @abstractmethod
    def compile(self, program: Program) -> None:
        """Compile (and cache) ``program``; raise :class:`CompileError` on failure."""

    @abstractmethod
    def launch(self, launch: Launch) -> LaunchResult:
        """Run one launch on fresh device copies of its buffers."""

    def compile_ahead(self, programs: tuple[Program, ...]) -> None:  # noqa: B027 - optional hook
        """Start compiling ``programs``, which calls will ask for later, where the backend has idle
        cores for it (the emulator: ``backends/compile_ahead.py``); here, nothing."""

    def time(self, request: TimingRequest) -> Timing:
        """Time the student's kernel against the reference, interleaved (only where ``measures_time``)."""
        raise Unsupported(f"the {self.name} backend cannot time kernels: timing needs a GPU")

    @contextlib.contextmanager
    def prepared(self, argument: Launch | TimingRequest) -> Iterator[None]:  # optional hook
        """Host work a call on ``argument`` needs, done before the call asks for the device and
        undone after it (a worker does it before the GPU's lock is taken: ``worker.serve``): none
        here; the GPU backend page-locks large arrays (``backends/pinned.py``). It must not raise:
        what it cannot do, the call does without."""
        yield

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release devices, worker processes and caches."""
