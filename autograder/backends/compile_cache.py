"""NVRTC's answers kept on disk: each distinct source is compiled once per machine.

A compile of a kernel that includes ``cooperative_groups.h`` takes NVRTC 1.5 to 2 s, and the same
sources come back again and again: every grading compiles the course's references, ``check``
is run on one file many times, a ``batch`` re-run or the GPU service meets kernels it has
compiled before, and a grading's emulator and GPU parts run in different processes. So
``compiler._compile`` asks this cache first, and keeps what NVRTC answered: the PTX, cubin,
kernel symbol and log of a compile, or the words of a refusal (the student's compile error,
the same every time). A crash of NVRTC or ptxas is never kept: it is rare, and it could be the
machine's (a child killed for memory), not the source's.

The key is a digest of everything the answer depends on: the source, its file name, the
kernel, the defines and the target, and the compiler itself, which is the pinned packages'
versions (``nvidia-cuda-nvrtc`` and the header packages), the include directories NVRTC is
given, and the text of ``compiler.py`` (its stand-in headers, its options and how it words
what ptxas refuses). A change to any of them is a new key, never a stale answer.

The cache is ``diskcache``'s (SQLite, safe across the processes of a machine, size-bounded
with the least recently stored dropped first): ``$AUTOGRADER_COMPILE_CACHE`` names its
folder, ``off`` turns it off; by default ``$XDG_CACHE_HOME/cuda-autograder/compiles`` (else
``~/.cache/...``). Values are JSON text, never pickles. A cache that cannot be opened, read
or written is no cache: the compile runs as it would without one.

The same cache keeps, beside the compiles, the reference kernel's counts on each case a
grading runs it on (``grading/reference_cache.py``), under keys of their own.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import diskcache

from autograder.contract import Program

VARIABLE = "AUTOGRADER_COMPILE_CACHE"
SIZE_LIMIT = 2 << 30  # bytes: about 10 000 compiles of a course's kernels (PTX, cubin, log)
LOCK_S = 2.0  # the longest a read or write waits for another process's: then it is a miss
COMPILER_PACKAGES = (
    "cuda-bindings",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-runtime",
    "nvidia-cuda-cccl",
    "nvidia-cuda-crt",
)


def folder() -> Path | None:
    """Where the cache lives, or None when ``$AUTOGRADER_COMPILE_CACHE`` is ``off`` (or when,
    unnamed, the user has no home folder to hold it)."""
    named = os.environ.get(VARIABLE, "")
    if named.lower() == "off":
        return None
    if named:
        return Path(named)
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no HOME and no entry in the password database
        return None
    return Path(base) / "cuda-autograder" / "compiles"


def key(program: Program, arch: str, compiler: Sequence[object]) -> str:
    """The digest of a compile of ``program`` for ``arch`` by ``compiler`` (its identity)."""
    what = [program.source, program.filename, program.kernel, list(program.defines), arch, list(compiler)]
    return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def package_versions() -> tuple[str, ...]:
    """The installed versions of the packages that make up the compiler."""
    found = []
    for name in COMPILER_PACKAGES:
        try:
            found.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return tuple(found)


def load(digest: str) -> dict | None:
    """The record kept under ``digest``, or None (none kept, or the cache cannot be read)."""
    cache = _opened()
    try:
        text = None if cache is None else cache.get(digest)
        return json.loads(text) if isinstance(text, str) else None
    except (*_CACHE_ERRORS, ValueError):
        return None


def holds(digest: str) -> bool:
    """Whether a record is kept under ``digest`` (False too when the cache cannot be read)."""
    cache = _opened()
    try:
        return cache is not None and digest in cache
    except _CACHE_ERRORS:
        return False


def store(digest: str, record: dict) -> None:
    """Keep ``record`` (JSON-able) under ``digest``, unless the cache cannot be written."""
    cache = _opened()
    if cache is None:
        return
    try:
        cache.set(digest, json.dumps(record))
    except _CACHE_ERRORS:
        return


_CACHE_ERRORS = (OSError, sqlite3.Error, diskcache.Timeout)


def _opened() -> diskcache.Cache | None:
    where = folder()
    return None if where is None else _opened_at(str(where), os.getpid())


@functools.lru_cache(maxsize=4)
def _opened_at(path: str, pid: int) -> diskcache.Cache | None:
    """The cache at ``path`` for process ``pid`` (a forked child opens its own: SQLite's
    connections are not to be shared across a fork)."""
    try:
        return diskcache.Cache(path, size_limit=SIZE_LIMIT, timeout=LOCK_S)
    except _CACHE_ERRORS:
        return None
