"""The planted kernels of ``kernels/`` as programs and launches (shared by tests and bench/device)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.contract import Buffer, Launch, Program, Scalar

KERNELS = Path(__file__).parent / "kernels"
BLOCK = 256


def program(stem: str, kernel: str = "vector_add") -> Program:
    path = KERNELS / f"{stem}.cu"
    return Program(path.read_text(), path.name, kernel)


def vector_add(stem: str, n: int, rng: np.random.Generator, time_limit_s: float = 20.0) -> Launch:
    """``c = a + b`` over ``n`` fresh random floats, ``c`` poisoned with NaN; block 256."""
    a, b = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    c = np.full(n, np.nan, dtype=np.float32)
    return Launch(
        program(stem),
        grid=(-(-n // BLOCK), 1, 1),
        block=(BLOCK, 1, 1),
        args=(Buffer("a", a), Buffer("b", b), Buffer("c", c, is_output=True), Scalar("n", n)),
        time_limit_s=time_limit_s,
    )


def vector_add_error(launch: Launch, outputs: dict[str, np.ndarray]) -> float:
    """Largest |c - (a + b)| in float64; NaN (an unwritten output) counts as infinite."""
    a, b = (arg.data.astype(np.float64) for arg in launch.args[:2])
    error = np.abs(outputs["c"].astype(np.float64) - (a + b))
    return float(np.max(np.nan_to_num(error, nan=np.inf), initial=0.0))
