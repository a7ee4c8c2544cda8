"""vector_add: c = a + b, one element per thread (handout: README.md beside this file)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(a, b, n):
    return {"c": a + b}


SPEC = Spec(
    name="vector_add",
    kernel="vector_add",
    args=(
        Array("a", "n"),
        Array("b", "n"),
        Array("c", "n", intent="out"),
        Scalar("n", "n"),
    ),
    block=("256",),
    grid=("cdiv(n, 256)",),
    cases={
        "aligned": ({"n": 256}, {"n": 4096}, {"n": 65536}),
        "ragged": ({"n": 1}, {"n": 10}, {"n": 1000}, {"n": 1_000_003}),
        "safety": ({"n": 1}, {"n": 1000}, {"n": 2053}),
        "perf": ({"n": 1 << 26},),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({}, {"n": (512, 32768)}, {"n": "256"}, aligned=True),),
        "ragged": (Draw({}, {"n": (2, 20000)}, {"n": "256"}),),
        "safety": (Draw({}, {"n": (2, 3000)}, {"n": "256"}),),
        "perf": (Draw({}, {"n": (1 << 25, 1 << 26)}, {"n": "256"}),),
    },
    reference=reference,
    flops="n",  # one addition per element (the roofline's measured point)
    ledger={
        "global_load_values": "2 * n",
        "global_store_values": "n",
    },  # the lecture's counts (autograder profile)
    tolerance=Tolerance(rtol="1e-6", atol="1e-6"),
)
