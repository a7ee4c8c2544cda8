"""transpose: out = inᵀ through a padded shared-memory tile (handout: README.md beside this file)."""

from autograder.course.spec import Array, Draw, Scalar, Spec, Tolerance


def reference(rows, cols, **arrays):  # "in" is a Python keyword, so it arrives in **arrays
    return {"out": arrays["in"].T}


def _shapes(T, R, *shapes):
    return tuple({"T": T, "R": R, "rows": r, "cols": c} for r, c in shapes)


def _bounds(low, high):
    return {"rows": (low, high), "cols": (low, high)}


_TILED = {"rows": "T", "cols": "T"}  # a drawn shape's sizes against its tiles


SPEC = Spec(
    name="transpose",
    kernel="transpose",
    args=(
        Array("in", "rows * cols", shape=("rows", "cols")),
        Array("out", "cols * rows", intent="out", shape=("cols", "rows")),
        Scalar("rows", "rows"),
        Scalar("cols", "cols"),
    ),
    defines={"TILE": "T", "BLOCK_ROWS": "R"},
    block=("T", "R"),
    grid=("cdiv(cols, T)", "cdiv(rows, T)"),
    cases={
        "aligned": (
            _shapes(32, 8, (32, 32), (256, 128)) + _shapes(16, 4, (64, 128)) + _shapes(64, 8, (512, 1024))
        ),
        "ragged": (
            _shapes(32, 8, (1, 1), (1, 100), (33, 65))
            + _shapes(16, 4, (70, 17))
            + _shapes(64, 8, (1000, 999))
        ),
        "safety": _shapes(32, 8, (64, 64), (33, 70)) + _shapes(16, 4, (45, 50)) + _shapes(64, 8, (65, 40)),
        "perf": _shapes(64, 8, (8192, 8192), (8191, 8193)),
    },
    draws={  # sizes each grading draws besides the listed ones (autograder.course.spec.Draw)
        "aligned": (Draw({"T": 32, "R": 8}, _bounds(32, 512), _TILED, aligned=True),),
        "ragged": (Draw({"T": 16, "R": 4}, _bounds(2, 200), _TILED),),
        "safety": (Draw({"T": 32, "R": 8}, _bounds(2, 100), _TILED),),
        "perf": (Draw({"T": 64, "R": 8}, _bounds(4096, 8193), _TILED),),
    },
    reference=reference,
    ledger={
        "global_load_values": "rows * cols",
        "global_store_values": "rows * cols",
    },  # the lecture's counts (autograder profile)
    tolerance=Tolerance(rtol="0", atol="0"),
)
