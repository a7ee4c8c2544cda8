"""matmul_naive: C = AᵀB, one output per thread (handout: README.md beside this file)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(A, B, M, N, K):
    return {"C": A.T @ B}


def _shapes(*shapes):
    return tuple({"M": m, "N": n, "K": k} for m, n, k in shapes)


def _bounds(low, high):
    return {"M": (low, high), "N": (low, high), "K": (low, high)}


SPEC = Spec(
    name="matmul_naive",
    kernel="matmul_naive",
    args=(
        Array("A", "K * M", shape=("K", "M")),
        Array("B", "K * N", shape=("K", "N")),
        Array("C", "M * N", intent="out", shape=("M", "N")),
        Scalar("M", "M"),
        Scalar("N", "N"),
        Scalar("K", "K"),
    ),
    block=("16", "16"),
    grid=("cdiv(N, 16)", "cdiv(M, 16)"),
    flops="2 * M * N * K",  # for the physical floor of the timing
    cases={
        "aligned": _shapes((64, 64, 64), (128, 128, 128), (256, 128, 64)),
        "ragged": _shapes((1, 1, 1), (33, 17, 5), (100, 130, 70), (257, 129, 65)),
        "safety": _shapes((64, 64, 64), (33, 47, 40), (70, 33, 65)),
        "perf": _shapes((2048, 2048, 2048), (2053, 2039, 2048)),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({}, _bounds(32, 192), {"M": "16", "N": "16", "K": "16"}, aligned=True),),
        "ragged": (Draw({}, _bounds(2, 160), {"M": "16", "N": "16"}),),
        "safety": (Draw({}, _bounds(2, 80), {"M": "16", "N": "16"}),),
        "perf": (Draw({}, _bounds(1024, 2100), {"M": "16", "N": "16"}),),
    },
    reference=reference,
    ledger={
        "global_load_values": "2 * M * N * K",
        "global_store_values": "M * N",
    },  # the lecture's counts (autograder profile)
    tolerance=Tolerance(rtol="1e-4", atol="1e-5 * K + 1e-5"),
)
