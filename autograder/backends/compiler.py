"""One NVRTC compile for both backends: PTX (with line info) for the emulator, a cubin for the GPU.

NVRTC comes from pip (``nvidia-cuda-nvrtc`` through ``cuda-bindings``), so this works on a
machine without a GPU. The kernel name is resolved with an NVRTC name expression, which
covers ``extern "C"`` kernels, C++-mangled ones and template instances alike. PTX from a new
NVRTC may carry a ``.version`` the GPU's driver refuses (docs/backend-contract.md), so the
GPU backend loads a cubin built for the device's own architecture instead.

Every compile is for a real architecture (``sm_90`` for the emulator), so NVRTC runs ptxas
on its PTX as a GPU's driver would need it: one compile gives the PTX, the cubin and ptxas's
verbose report (registers, spills, shared memory: :func:`ptxas_figures`), and what ptxas
refuses (inline PTX it does not know, a feature of a newer GPU, a limit of this one) is the
student's :class:`PtxasRefusal` on every backend, with ptxas's message on the source line.

NVRTC runs ptxas inside its own process, and ptxas can crash on hostile PTX (``st.param`` to a
global address segfaults it): every compile therefore runs in a forked child
(``compile_child``), and a child killed by a signal is the student's compile error naming the
kernel's inline asm (:func:`_crashed`), never the grader's crash. The child costs about 20 ms
a compile (the fork, and the pages its compile touches): vector_add's 50 ms became 70, and
gemm_tensor_core's 2.3 s did not move beyond the noise; a ``python -m`` child would spend 340 ms
starting. A compile's answer is kept in this process and on disk (``compile_cache``), so a
source this machine compiled before is answered without NVRTC, or a child; and a grading's
compiles may be started ahead of need on idle cores (``compile_ahead``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import os
import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath

from autograder.backends import compile_ahead, compile_cache
from autograder.backends.compile_child import in_child as _in_child
from autograder.contract import CompileError, Program

EMULATOR_ARCH = "sm_90"  # the emulator's PTX is an H200's, and ptxas assembles it as for one
# The NVRTC the course is graded with (pyproject.toml pins the package). Another version may
# compile the same source differently: NVRTC 13.0 removes an endless `volatile` spin loop
# that 13.5 keeps, so one machine would report a hang and another a pass.
PINNED_NVRTC = (13, 5)

# NVRTC compiles device code only and finds no C library headers, yet students write
# `#include <cstdio>` for printf or `<climits>` for INT_MAX. These stand-ins give device code
# what those headers would (printf, assert and the math functions are built into NVRTC already).
_INTS = """typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t; typedef long long intptr_t; typedef unsigned long long uintptr_t;
"""
_LIMITS = """#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
"""
_FLOATS = """#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-016
"""
_BUILT_IN = "/* NVRTC provides this in device code already */\n"
# NVRTC declares the math functions but none of <cmath>'s macros, and nothing in std::. The
# constants are glibc's (what nvcc's <cmath> gives); NAN and INFINITY are bit casts, constant
# expressions as glibc's builtins are (a division would be evaluated at run time).
_MATH = """#define INFINITY __builtin_bit_cast(float, 0x7f800000u)
#define HUGE_VALF INFINITY
#define HUGE_VAL __builtin_bit_cast(double, 0x7ff0000000000000ull)
#define NAN __builtin_bit_cast(float, 0x7fc00000u)
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
namespace std {
using ::abs; using ::fabs; using ::fmod; using ::remainder; using ::fma; using ::fmax; using ::fmin;
using ::fdim; using ::exp; using ::exp2; using ::expm1; using ::log; using ::log10; using ::log2;
using ::log1p; using ::pow; using ::sqrt; using ::cbrt; using ::hypot; using ::sin; using ::cos;
using ::tan; using ::asin; using ::acos; using ::atan; using ::atan2; using ::sinh; using ::cosh;
using ::tanh; using ::asinh; using ::acosh; using ::atanh; using ::erf; using ::erfc; using ::tgamma;
using ::lgamma; using ::ceil; using ::floor; using ::trunc; using ::round; using ::rint;
using ::nearbyint; using ::lround; using ::llround; using ::copysign; using ::nextafter;
using ::frexp; using ::ldexp; using ::modf; using ::scalbn; using ::ilogb; using ::logb;
using ::isnan; using ::isinf; using ::isfinite; using ::signbit;
}
"""
STANDARD_HEADERS: dict[str, str] = {
    "cstdio": _BUILT_IN,
    "stdio.h": _BUILT_IN,
    "cmath": _MATH,
    "math.h": _MATH,
    "cassert": _BUILT_IN,
    "assert.h": _BUILT_IN,
    "cstdint": _INTS,
    "stdint.h": _INTS,
    "climits": _LIMITS,
    "limits.h": _LIMITS,
    "cfloat": _FLOATS,
    "float.h": _FLOATS,
}


@dataclass(frozen=True)
class Compiled:
    ptx: str  # PTX text
    cubin: bytes  # machine code for a real sm_XX target, or b"" for a virtual compute_XX one
    lowered_name: str  # the kernel's symbol in the PTX / cubin
    log: str  # compiler warnings, and ptxas's verbose report for a real target


class PtxasRefusal(CompileError):
    """NVRTC compiled the source, and ptxas refused its PTX for the target GPU."""


def compile_ptx(program: Program) -> Compiled:
    """PTX for the emulator (line info), with the ``sm_90`` cubin and ptxas's report of the same compile."""
    return _compile(program, EMULATOR_ARCH)


def compile_ptx_ahead(programs: Iterable[Program]) -> None:
    """Start :func:`compile_ptx` of each of ``programs`` this machine has not kept, on the cores
    this process leaves idle (``compile_ahead``); a later :func:`compile_ptx` takes its answer."""
    if compile_ahead.slots() <= 0:
        return
    identity = compiler_identity()
    keys = [(program, EMULATOR_ARCH) for program in programs]
    new = [key for key in keys if not compile_cache.holds(compile_cache.key(*key, identity))]
    compile_ahead.schedule(new, _compile_here)


def compile_cubin(program: Program, arch: str) -> Compiled:
    """A cubin for a device, ``arch`` like ``"sm_90"``; its log holds ptxas's verbose report."""
    return _compile(program, arch)


def compile_virtual(program: Program) -> Compiled:
    """PTX for ``compute_90`` that ptxas never sees: what the emulator reads of a kernel ptxas
    refuses, to word a limit it knows (``emulator/limits.py``) in its own terms."""
    return _compile(program, "compute_90")


def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    _err, major, minor = nvrtc.nvrtcVersion()
    return major, minor


def nvrtc_problem() -> str | None:
    """Why this machine's verdicts may differ from the course's: an NVRTC other than the pinned one."""
    found = nvrtc_version()
    if found == PINNED_NVRTC:
        return None
    return (
        f"NVRTC {found[0]}.{found[1]} compiles here, the course pins {PINNED_NVRTC[0]}.{PINNED_NVRTC[1]} "
        "(pyproject.toml): a kernel may compile differently, so verdicts may differ from other machines'"
    )


@functools.lru_cache(maxsize=1)
def cuda_include_dirs() -> tuple[str, ...]:
    """Where NVRTC finds the CUDA headers a kernel may include (``cuda_fp16.h``, ``mma.h``).

    The pip packages ``nvidia-cuda-runtime`` and ``nvidia-cuda-crt`` put them beside NVRTC's
    own ``nvrtc.h``; a CUDA toolkit (``CUDA_HOME``, ``CUDA_PATH``, ``/usr/local/cuda``) serves
    where they are missing. Without either, a kernel that includes them fails to compile.
    The CCCL headers that ``cooperative_groups.h`` needs (``nvidia-cuda-cccl``, or a CUDA 13
    toolkit) sit in ``cccl/`` beside them.
    """
    toolkits = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = _pip_include_dirs() + [Path(t) / "include" for t in toolkits if t]
    headers = [d for d in candidates if (d / "cuda_fp16.h").is_file() and (d / "crt" / "mma.h").is_file()]
    cccl = [d / "cccl" for d in candidates if (d / "cccl").is_dir()]
    return tuple(str(d) for d in headers[:1] + cccl[:1]) if headers else ()


def _pip_include_dirs() -> list[Path]:
    try:
        import nvidia
    except ImportError:
        return []
    return [Path(root) / name / "include" for root in nvidia.__path__ for name in ("cu13", "cu12")]


@functools.lru_cache(maxsize=64)
def _compile(program: Program, arch: str) -> Compiled:
    """``program`` compiled for ``arch``: its compile started ahead (``compile_ahead``), else
    NVRTC's answer kept on disk (``compile_cache``), else a compile in a child process, which a
    crash of NVRTC or ptxas kills instead of the grader; the crash becomes the student's compile
    error (:func:`_crashed`), and is not kept."""
    digest = compile_cache.key(program, arch, compiler_identity())
    ahead = compile_ahead.take((program, arch))
    kept = None if ahead else _kept(compile_cache.load(digest))
    if isinstance(kept, CompileError):
        raise kept
    if kept is not None:
        return kept
    try:
        outcome = ahead.answer() if ahead else _in_child(_compile_here, program, arch)
    except CompileError as refused:
        if _keeps_answers():
            compile_cache.store(
                digest, {"kind": "refused", "class": type(refused).__name__, "log": refused.log}
            )
        raise
    if isinstance(outcome, Compiled):
        if _keeps_answers():
            fields = {"ptx": outcome.ptx, "lowered_name": outcome.lowered_name, "log": outcome.log}
            cubin = base64.b64encode(outcome.cubin).decode()
            compile_cache.store(digest, {"kind": "compiled", **fields, "cubin": cubin})
        return outcome
    if arch.startswith("sm_"):
        virtual = _in_child(_compile_here, program, "compute_90")  # the same compile without ptxas
        if isinstance(virtual, Compiled):
            raise PtxasRefusal(_crashed(outcome, program, "ptxas, NVIDIA's assembler,", virtual.ptx))
    raise CompileError(_crashed(outcome, program, "NVRTC, NVIDIA's CUDA compiler,", ""))


@functools.lru_cache(maxsize=1)
def compiler_identity() -> tuple[object, ...]:
    """What makes this compiler this one, for the compile cache's keys: the pinned packages'
    versions, the include directories NVRTC is given, and this module's text. Not NVRTC's own
    version, which loading the library would cost (40 MB of a worker's memory, when every
    compile is answered from the cache): an answer is kept only from the package's NVRTC
    (:func:`_keeps_answers`), so the package's version names it."""
    own = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return (compile_cache.package_versions(), cuda_include_dirs(), own)


def _keeps_answers() -> bool:
    """Whether the NVRTC this process loaded is the ``nvidia-cuda-nvrtc`` package's, the one the
    cache's keys name (a toolkit's found first, or no package, keeps nothing)."""
    try:
        package = importlib.metadata.version("nvidia-cuda-nvrtc").split(".")
    except importlib.metadata.PackageNotFoundError:
        return False
    return [str(part) for part in nvrtc_version()] == package[:2]


_REFUSALS: dict[str, type[CompileError]] = {"CompileError": CompileError, "PtxasRefusal": PtxasRefusal}


def _kept(record: dict | None) -> Compiled | CompileError | None:
    """A compile cache record as the compile it kept (or the refusal); None for none, or one
    this version cannot read."""
    try:
        if record is None:
            return None
        if record["kind"] == "refused":
            return _REFUSALS[record["class"]](record["log"])
        cubin = base64.b64decode(record["cubin"])
        return Compiled(record["ptx"], cubin, record["lowered_name"], record["log"])
    except (KeyError, TypeError, ValueError):
        return None


def _compile_here(program: Program, arch: str) -> Compiled:
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(
        program.source.encode(),
        program.filename.encode(),
        len(STANDARD_HEADERS),
        [text.encode() for text in STANDARD_HEADERS.values()],
        [name.encode() for name in STANDARD_HEADERS],
    )
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        expression = f"&{program.kernel}".encode()
        _check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, expression)[0], "nvrtcAddNameExpression")
        options = [f"--gpu-architecture={arch}", "-lineinfo", "--std=c++17", "-default-device"]
        options += [f"--include-path={directory}" for directory in cuda_include_dirs()]
        options += [f"-D{name}={value}" for name, value in program.defines]
        options += ["--ptxas-options=-v"] if arch.startswith("sm_") else []
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        log = _log(nvrtc, prog)
        ptx = _blob(nvrtc, prog, "PTX").rstrip(b"\0").decode()  # there when only ptxas failed
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            refused = _refusal(log, ptx, program, arch)
            if refused:
                raise PtxasRefusal(refused)
            raise CompileError(_student_log(log, program) or str(err))
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, expression)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"{program.filename}: no kernel named '{program.kernel}' was found")
        cubin = _blob(nvrtc, prog, "CUBIN") if arch.startswith("sm_") else b""
        return Compiled(ptx, cubin, lowered.decode(), log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


_INLINE_ASM = "// begin inline asm"  # NVRTC brackets each inline asm statement's PTX with these


def _crashed(signal_number: int, program: Program, what: str, ptx: str) -> str:
    """The student's words for a compile that crashed the compiler: the signal, and where to
    look: the source lines of the kernel's inline asm (from PTX compiled without ptxas), or
    the kernel."""
    try:
        name = f"signal {signal_number}, {signal.Signals(signal_number).name}"
    except ValueError:
        name = f"signal {signal_number}"
    lines = ptx.splitlines()
    number = _file_number(ptx, program.filename)
    asm = sorted(
        {
            line
            for k, text in enumerate(lines)
            if text.strip() == _INLINE_ASM and (line := _source_line(lines[:k], number))
        }
    )
    if len(asm) == 1:
        where, look = f"{program.filename}({asm[0]})", f"look at the inline asm on line {asm[0]}"
    elif asm:
        where = program.filename
        look = "look at the inline asm on lines " + ", ".join(str(line) for line in asm)
    else:
        where, look = program.filename, f"look at the kernel {program.kernel}"
    return (
        f"{where}: error: {what} crashed on this kernel ({name}); a GPU's compiler would fail "
        f"on it too: {look}"
    )


def _student_log(log: str, program: Program) -> str:
    """NVRTC's messages about the student's file; its name-expression lookup of a missing
    kernel (``__nv_name_map``) becomes one sentence naming the kernel the handout asks for."""
    blocks = [b for b in log.strip().split("\n\n") if b.strip()]
    own = [b for b in blocks if not b.lstrip().startswith("__nv_name_map")]
    if len(own) == len(blocks):
        return log.strip()
    missing = (
        f"{program.filename}: no kernel named '{program.kernel}' is defined; keep the name and "
        f"signature the handout gives (__global__ void {program.kernel}(...))"
    )
    errors = [b for b in own if "error" in b and "detected in the compilation" not in b]
    return "\n\n".join([*errors, missing])


_PTXAS_AT = re.compile(
    r"^ptxas\b.*?, line (\d+); error\s*: (.*)$"
)  # "ptxas <its input>, line 29; error : ..."
_PTXAS_ERROR = re.compile(r"^ptxas (?:error|fatal)\s*: (.*)$")
_PTXAS_ABORTED = "Ptx assembly aborted due to errors"  # ptxas's last line after any error: says nothing
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")  # .loc FILE LINE COLUMN[, ... inlined_at ...]
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.MULTILINE)
_DIRECTORIES = re.compile(r"(?<![\w.])(?:/[\w.+-]+)+/")  # /any/absolute/dir/ before a file name


def _refusal(log: str, ptx: str, program: Program, arch: str) -> str | None:
    """ptxas's errors as the student reads them (``file.cu(LINE): error: ...``, the PTX it
    refused quoted), or None when ptxas refused nothing (NVRTC's own errors)."""
    errors = []
    for text in log.splitlines():
        if at := _PTXAS_AT.match(text.strip()):
            errors.append(_located(int(at[1]), at[2].strip(), ptx, program))
        elif (error := _PTXAS_ERROR.match(text.strip())) and error[1].strip() != _PTXAS_ABORTED:
            errors.append(f"{program.filename}: error: {error[1].strip()}")
    if not errors:
        return None
    errors.append(
        f"ptxas, which turns the PTX NVRTC compiled into a GPU's machine code, refuses it for {arch}: "
        "a GPU cannot load this kernel"
    )
    return _DIRECTORIES.sub("", "\n".join(errors))


def _located(number: int, message: str, ptx: str, program: Program) -> str:
    """ptxas's error on PTX line ``number``, at the student's source line that PTX came from."""
    lines = ptx.splitlines()[:number]
    line = _source_line(lines, _file_number(ptx, program.filename))
    where = f"{program.filename}({line})" if line else program.filename
    refused = lines[-1].strip() if len(lines) == number else ""
    return f"{where}: error: {message}" + (f" (in the PTX: {refused})" if refused else "")


def _file_number(ptx: str, filename: str) -> str | None:
    """The number PTX's ``.file`` directives give the student's file (headers have others)."""
    name = PurePath(filename).name
    return next((m[1] for m in _FILE.finditer(ptx) if PurePath(m[2]).name == name), None)


def _source_line(lines: list[str], file_number: str | None) -> int | None:
    """The source line of the last ``.loc`` in ``lines`` that is in the student's file."""
    for text in reversed(lines):
        if (loc := _LOC.match(text)) and loc[1] == file_number:
            return int(loc[2])
    return None


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_FIGURES = {
    "stack_frame": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "static_shared": re.compile(r"(\d+) bytes smem"),
}


def ptxas_figures(report: str, kernel: str) -> dict[str, int]:
    """The figures of entry function ``kernel`` (its lowered name) in ptxas's verbose ``report``,
    by name (0 where absent): stack_frame, spill_stores, spill_loads, registers, barriers,
    static_shared.

    ptxas reports, per entry function::

        ptxas info    : Compiling entry function 'kernel' for 'sm_90'
        ptxas info    : Function properties for kernel
        ptxas         .     256 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
        ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem

    The stack frame is the thread's local memory (local arrays and spills); "smem" is the
    kernel's static shared memory (absent when it has none); barriers are the named barriers
    it uses (``__syncthreads()`` is barrier 0).
    """
    section = _section(report, kernel)
    return {
        name: int(m.group(1)) if (m := pattern.search(section)) else 0 for name, pattern in _FIGURES.items()
    }


def _section(report: str, kernel: str) -> str:
    """The lines ptxas wrote about ``kernel``, from its entry line to the next entry's."""
    entries = list(_ENTRY.finditer(report))
    for k, entry in enumerate(entries):
        if entry.group(1) == kernel:
            end = entries[k + 1].start() if k + 1 < len(entries) else len(report)
            return report[entry.start() : end]
    raise ValueError(f"ptxas reported nothing for the kernel {kernel}")


def _blob(nvrtc, prog, kind: str) -> bytes:
    err, size = getattr(nvrtc, f"nvrtcGet{kind}Size")(prog)
    _check(nvrtc, err, f"nvrtcGet{kind}Size")
    buf = bytearray(size)  # NVRTC writes into it: never an immutable bytes (b" " is a shared object)
    _check(nvrtc, getattr(nvrtc, f"nvrtcGet{kind}")(prog, buf)[0], f"nvrtcGet{kind}")
    return bytes(buf)


def _log(nvrtc, prog) -> str:
    _err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = bytearray(size)  # as in _blob: a clean compile's log is one byte, and b" " * 1 is b" " itself
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return bytes(buf).replace(b"\0", b"").decode(errors="replace")  # NVRTC joins its logs with NULs


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
