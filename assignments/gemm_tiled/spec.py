"""gemm_tiled: C = AB through TILE x TILE shared-memory tiles, one output per thread (handout: README.md)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(A, B, M, N, K):
    return {"C": A @ B}


def _shapes(T, *shapes):
    return tuple({"T": T, "M": m, "N": n, "K": k} for m, n, k in shapes)


def _bounds(low, high):
    return {"M": (low, high), "N": (low, high), "K": (low, high)}


_TILED = {"M": "T", "N": "T", "K": "T"}  # a drawn shape's sizes against its tiles


SPEC = Spec(
    name="gemm_tiled",
    kernel="gemm_tiled",
    args=(
        Array("A", "M * K", shape=("M", "K")),
        Array("B", "K * N", shape=("K", "N")),
        Array("C", "M * N", intent="out", shape=("M", "N")),
        Scalar("M", "M"),
        Scalar("N", "N"),
        Scalar("K", "K"),
    ),
    defines={"TILE": "T"},
    block=("T", "T"),
    grid=("cdiv(N, T)", "cdiv(M, T)"),
    flops="2 * M * N * K",  # for the physical floor of the timing
    cases={
        "aligned": _shapes(8, (64, 64, 64)) + _shapes(16, (128, 128, 128)) + _shapes(32, (128, 64, 96)),
        "ragged": (
            _shapes(8, (1, 1, 1), (33, 17, 9)) + _shapes(16, (100, 70, 130)) + _shapes(32, (65, 97, 33))
        ),
        "safety": (
            _shapes(8, (33, 47, 40)) + _shapes(16, (64, 64, 64), (70, 66, 35)) + _shapes(32, (40, 45, 70))
        ),
        "perf": _shapes(32, (2048, 2048, 2048), (2053, 2039, 2048), (2048, 11008, 4096)),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({"T": 16}, _bounds(32, 192), _TILED, aligned=True),),
        "ragged": (Draw({"T": 8}, _bounds(2, 130), _TILED),),
        "safety": (Draw({"T": 16}, _bounds(2, 80), _TILED),),
        "perf": (Draw({"T": 32}, _bounds(1024, 2100), _TILED),),
    },
    reference=reference,
    ledger={
        "global_load_values": "2 * M * N * K / T",
        "global_store_values": "M * N",
    },  # the lecture's counts (autograder profile)
    tolerance=Tolerance(rtol="1e-4", atol="1e-5 * K + 1e-5"),
)
