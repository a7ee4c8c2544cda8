"""gemm_tensor_core: C = AB, half inputs, float accumulation through wmma (handout: README.md)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(A, B, M, N, K):
    return {"C": A @ B}


def _shapes(*shapes):
    return tuple({"M": m, "N": n, "K": k} for m, n, k in shapes)


def _bounds(low, high):
    return {"M": (low, high), "N": (low, high), "K": (low, high)}


_ALIGNED = {"M": "128", "N": "128", "K": "64"}  # a drawn aligned shape: whole 128 x 128 tiles
_RAGGED = {"M": "16", "N": "16", "K": "16"}  # a drawn ragged shape: no size a multiple of 16


SPEC = Spec(
    name="gemm_tensor_core",
    kernel="gemm_tensor_core",
    args=(
        Array("A", "M * K", dtype="float16", shape=("M", "K")),
        Array("B", "K * N", dtype="float16", shape=("K", "N")),
        Array("C", "M * N", intent="out", shape=("M", "N")),
        Scalar("M", "M"),
        Scalar("N", "N"),
        Scalar("K", "K"),
    ),
    block=("128",),
    grid=("cdiv(N, 128)", "cdiv(M, 128)"),
    shared_bytes="71680",  # the reference's two buffers: 2 * (128 * 72 + 64 * 136) halves
    flops="2 * M * N * K",  # for the physical floor of the timing
    cases={
        "aligned": _shapes((128, 128, 64), (256, 128, 128)),
        "ragged": _shapes((1, 1, 1), (33, 47, 13), (130, 200, 70)),
        "safety": _shapes((64, 64, 64), (33, 47, 40), (70, 66, 35)),
        "perf": _shapes((4096, 4096, 4096), (2053, 2039, 2048)),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({}, {"M": (128, 512), "N": (128, 512), "K": (64, 192)}, _ALIGNED, aligned=True),),
        "ragged": (Draw({}, _bounds(2, 130), _RAGGED),),
        "safety": (Draw({}, _bounds(2, 70), _RAGGED),),
        "perf": (Draw({}, _bounds(2048, 4096), _RAGGED),),
    },
    reference=reference,
    tolerance=Tolerance(rtol="1e-3", atol="2e-5 * K + 1e-4"),
    element_bytes={"global_store_values": 4},  # halves in, floats out (the rest: the inputs' 2 bytes)
)
