"""matmul_register_tile: C = AᵀB, a V x V output tile per thread in registers (handout: README.md)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(A, B, M, N, K):
    return {"C": A.T @ B}


def _shapes(V, *shapes):
    return tuple({"V": V, "M": m, "N": n, "K": k} for m, n, k in shapes)


def _bounds(low, high):
    return {"M": (low, high), "N": (low, high), "K": (low, high)}


SPEC = Spec(
    name="matmul_register_tile",
    kernel="matmul_register_tile",
    args=(
        Array("A", "K * M", shape=("K", "M")),
        Array("B", "K * N", shape=("K", "N")),
        Array("C", "M * N", intent="out", shape=("M", "N")),
        Scalar("M", "M"),
        Scalar("N", "N"),
        Scalar("K", "K"),
    ),
    defines={"V": "V"},
    block=("16", "16"),
    grid=("cdiv(N, 16 * V)", "cdiv(M, 16 * V)"),
    flops="2 * M * N * K",  # for the physical floor of the timing
    cases={
        "aligned": _shapes(2, (64, 64, 64), (128, 128, 128)) + _shapes(4, (128, 128, 64), (256, 128, 96)),
        "ragged": _shapes(2, (1, 1, 1), (33, 70, 17)) + _shapes(4, (65, 63, 9), (200, 130, 70)),
        "safety": _shapes(2, (64, 64, 64), (45, 33, 40)) + _shapes(4, (64, 64, 64), (70, 66, 35)),
        "perf": _shapes(4, (2048, 2048, 2048), (2053, 2039, 2048)),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({"V": 2}, _bounds(32, 192), {"M": "16 * V", "N": "16 * V"}, aligned=True),),
        "ragged": (Draw({"V": 4}, _bounds(2, 200), {"M": "16 * V", "N": "16 * V"}),),
        "safety": (Draw({"V": 2}, _bounds(2, 80), {"M": "16 * V", "N": "16 * V"}),),
        "perf": (Draw({"V": 4}, _bounds(1024, 2100), {"M": "16 * V", "N": "16 * V"}),),
    },
    reference=reference,
    ledger={
        "global_load_values": "2 * M * N * K / V",
        "global_store_values": "M * N",
    },  # the lecture's counts (autograder profile)
    tolerance=Tolerance(rtol="1e-4", atol="1e-5 * K + 1e-5"),
)
