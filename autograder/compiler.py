"""One NVRTC compile for both backends: PTX (with line info) for the emulator, a cubin for the GPU.

NVRTC comes from pip (``nvidia-cuda-nvrtc`` through ``cuda-bindings``), so this works on a
machine without a GPU. The kernel name is resolved with an NVRTC name expression, which
covers ``extern "C"`` kernels, C++-mangled ones and template instances alike. PTX from a new
NVRTC may carry a ``.version`` the GPU's driver refuses (docs/backend-contract.md), so the
GPU backend loads a cubin built for the device's own architecture instead.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from autograder.backends.base import CompileError, Program

EMULATOR_ARCH = "compute_90"  # the virtual architecture the emulator's PTX is written for
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
    ptx: str  # PTX text, or "" for a cubin-only compile
    cubin: bytes  # machine code for a real sm_XX target, or b"" for a PTX compile
    lowered_name: str  # the kernel's symbol in the PTX / cubin
    log: str  # compiler warnings


def compile_ptx(program: Program) -> Compiled:
    """PTX for the emulator (``compute_90``, line info)."""
    return _compile(program, EMULATOR_ARCH)


def compile_cubin(program: Program, arch: str) -> Compiled:
    """A cubin for a device, ``arch`` like ``"sm_90"``."""
    return _compile(program, arch)


def compile_reported(program: Program, arch: str) -> Compiled:
    """A cubin for ``arch`` whose log is ptxas's verbose report (registers, spills, stack frame,
    shared memory, barriers per function: ``autograder/resources.py`` reads it)."""
    return _compile(program, arch, ("--ptxas-options=-v",))


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
def _compile(program: Program, arch: str, extra: tuple[str, ...] = ()) -> Compiled:
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
        options += extra
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        log = _log(nvrtc, prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(_student_log(log, program) or str(err))
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, expression)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"{program.filename}: no kernel named '{program.kernel}' was found")
        if arch.startswith("sm_"):
            return Compiled("", _blob(nvrtc, prog, "CUBIN"), lowered.decode(), log)
        ptx = _blob(nvrtc, prog, "PTX").rstrip(b"\0").decode()
        return Compiled(ptx, b"", lowered.decode(), log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


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
    return bytes(buf).rstrip(b"\0").decode(errors="replace")


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
