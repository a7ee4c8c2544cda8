"""window_sum: the valid five-wide window sum staged through shared memory (handout: README.md)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(x, n):
    return {"y": sum(x[d : d + n] for d in range(5))}


def _cases(T, ns):
    return tuple({"T": T, "n": n} for n in ns)


SPEC = Spec(
    name="window_sum",
    kernel="window_sum",
    args=(
        Array("x", "n + 4"),
        Array("y", "n", intent="out"),
        Scalar("n", "n"),
    ),
    defines={"BLOCK": "T"},
    block=("T",),
    grid=("cdiv(n, T)",),
    cases={
        "aligned": _cases(32, (32, 4096)) + _cases(128, (1024,)) + _cases(256, (65536,)),
        "ragged": _cases(32, (1, 33)) + _cases(128, (1000,)) + _cases(256, (3, 1_000_003)),
        "safety": _cases(32, (1, 70)) + _cases(128, (1000,)) + _cases(256, (256, 2053)),
        "perf": _cases(256, (1 << 26,)),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({"T": 128}, {"n": (256, 16384)}, {"n": "T"}, aligned=True),),
        "ragged": (Draw({"T": 256}, {"n": (2, 20000)}, {"n": "T"}),),
        "safety": (Draw({"T": 32}, {"n": (2, 3000)}, {"n": "T"}),),
        "perf": (Draw({"T": 256}, {"n": (1 << 25, 1 << 26)}, {"n": "T"}),),
    },
    reference=reference,
    flops="4 * n",  # four additions per five-wide window (the roofline's measured point)
    tolerance=Tolerance(rtol="1e-5", atol="1e-5"),
)
