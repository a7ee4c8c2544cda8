"""matmul_block_tile: C = AᵀB with an L x L block tile of V x V thread tiles (handout: README.md)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(A, B, M, N, K):
    return {"C": A.T @ B}


def _shapes(L, V, S, *shapes):
    return tuple({"L": L, "V": V, "S": S, "M": m, "N": n, "K": k} for m, n, k in shapes)


def _tiles(L, V, S):
    return {"L": L, "V": V, "S": S}


def _bounds(low, high):
    return {"M": (low, high), "N": (low, high), "K": (low, high)}


_TILED = {"M": "L", "N": "L", "K": "S"}  # a drawn shape's sizes against its tiles


SPEC = Spec(
    name="matmul_block_tile",
    kernel="matmul_block_tile",
    args=(
        Array("A", "K * M", shape=("K", "M")),
        Array("B", "K * N", shape=("K", "N")),
        Array("C", "M * N", intent="out", shape=("M", "N")),
        Scalar("M", "M"),
        Scalar("N", "N"),
        Scalar("K", "K"),
    ),
    defines={"L": "L", "V": "V", "S": "S"},
    block=("L / V", "L / V"),
    grid=("cdiv(N, L)", "cdiv(M, L)"),
    flops="2 * M * N * K",  # for the physical floor of the timing
    cases={
        "aligned": _shapes(32, 4, 8, (64, 64, 64), (128, 128, 128))
        + _shapes(64, 8, 8, (128, 128, 64))
        + _shapes(64, 4, 16, (128, 64, 128))
        + _shapes(128, 8, 8, (256, 256, 64)),
        "ragged": _shapes(32, 4, 8, (1, 1, 1), (33, 47, 13), (100, 70, 130))
        + _shapes(64, 8, 8, (65, 130, 17))
        + _shapes(64, 4, 16, (70, 65, 33))
        + _shapes(128, 8, 8, (130, 129, 9)),
        "safety": _shapes(32, 4, 8, (64, 64, 64), (33, 47, 40))
        + _shapes(64, 8, 8, (70, 66, 35))
        + _shapes(64, 4, 16, (64, 64, 64)),
        "perf": _shapes(128, 8, 8, (4096, 4096, 4096), (2053, 2039, 2048)),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw(_tiles(32, 4, 8), _bounds(32, 192), _TILED, aligned=True),),
        "ragged": (Draw(_tiles(64, 8, 8), _bounds(2, 200), _TILED),),
        "safety": (Draw(_tiles(32, 4, 8), _bounds(2, 80), _TILED),),
        "perf": (Draw(_tiles(128, 8, 8), _bounds(1024, 2100), _TILED),),
    },
    reference=reference,
    ledger={
        "global_load_values": "2 * M * N * K / L",
        "shared_load_values": "2 * M * N * K / V",
        "global_store_values": "M * N",
    },  # the lecture's counts (autograder profile)
    tolerance=Tolerance(rtol="1e-4", atol="1e-5 * K + 1e-5"),
)
