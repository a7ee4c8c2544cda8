"""reduction: add the sum of n floats into sum[0] (handout: README.md beside this file).

``sum`` is ``inout``: it holds a random nonzero value before the launch and the kernel adds
the sum of ``x`` to it (blocks combine their partial sums with atomicAdd), so an untouched
``sum`` is wrong and no zero-initialised output is needed.
"""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(x, sum, n):
    return {"sum": sum + x.sum()}


def _cases(T, G, *ns):
    return tuple({"T": T, "G": G, "n": n} for n in ns)


SPEC = Spec(
    name="reduction",
    kernel="reduction",
    args=(
        Array("x", "n"),
        Array("sum", "1", intent="inout"),
        Scalar("n", "n"),
    ),
    defines={"BLOCK": "T"},
    block=("T",),
    grid=("min(cdiv(n, T), G)",),
    cases={
        "aligned": _cases(256, 64, 256, 65536, 1 << 20) + _cases(128, 8, 4096) + _cases(32, 16, 1024),
        "ragged": _cases(256, 64, 1, 3, 1000, 1_000_003) + _cases(128, 4, 4097) + _cases(32, 3, 999),
        "safety": _cases(256, 4, 1, 1000, 5003) + _cases(64, 8, 777) + _cases(32, 2, 100),
        "perf": _cases(256, 1056, 1 << 26),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({"T": 128, "G": 8}, {"n": (256, 32768)}, {"n": "T"}, aligned=True),),
        "ragged": (Draw({"T": 256, "G": 64}, {"n": (2, 20000)}, {"n": "T"}),),
        "safety": (Draw({"T": 64, "G": 8}, {"n": (2, 6000)}, {"n": "T"}),),
        "perf": (Draw({"T": 256, "G": 1056}, {"n": (1 << 25, 1 << 26)}, {"n": "T"}),),
    },
    reference=reference,
    flops="n",  # each element added once, onto sum[0]'s value (the roofline's measured point)
    tolerance=Tolerance(rtol="1e-5", atol="3e-7 * n + 1e-5"),
)
