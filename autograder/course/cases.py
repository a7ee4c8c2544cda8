"""From a spec and its cases to ready :class:`Launch` values: fresh inputs, poisoned outputs.

:func:`prepare` is the one way a case becomes a launch, and :func:`group_cases` the one way a
case group becomes its cases: grading (:func:`prepare_group`), timing (:func:`timing_requests`,
on input sets 1 to 3 where grading uses set 0), the compute-sanitizer cross-check and
``autograder profile`` all go through them, so the same case and input set is the same launch
everywhere. Inputs are drawn from a seed that depends on the secret seed
of the grading run and on the case's identity (assignment, case group, index, input set),
so the student's kernel, the reference kernel and every backend see the same inputs for a
case, and nothing can be memorised across runs. Besides the cases it lists, a group has the
cases it draws from the same secret (:func:`with_drawn`): sizes no handout lists, within the
spec's bounds, so that no kernel can tell a graded case by its size. Default inputs are never
zero: floats have magnitudes uniform in [0.5, 1.5] with a random sign, integers are in [1, 100)
with a random sign where signed.
Outputs start as NaN (integers: a sentinel), so an output never written is visible.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from autograder.contract import Buffer, Launch, Program, TimingRequest
from autograder.contract import Scalar as ScalarArg
from autograder.course.spec import Array, Case, Draw, Spec, SpecError, dim3, evaluate

TIMING_INPUT_SETS = 3  # input sets a timed case rotates through (sets 1..3; grading runs set 0)
DRAW_TRIES = 10_000  # values tried for one drawn size before the spec's bounds are called too tight
T = TypeVar("T")


def case_seed(secret: int, assignment: str, group: str, index: int, launch: int = 0) -> int:
    """The seed of one launch of one case, derived from the grading run's secret seed."""
    digest = hashlib.sha256(f"{secret}/{assignment}/{group}/{index}/{launch}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def sentinel(dtype: npt.DTypeLike) -> float | int:
    """What an output holds before the launch: NaN, or an integer no kernel computes by chance."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    info = np.iinfo(dtype)
    return info.min if dtype.kind == "i" else info.max


def unwritten(dtype: npt.DTypeLike, values: np.ndarray) -> np.ndarray:
    """Where ``values`` still hold the sentinel."""
    if np.dtype(dtype).kind == "f":
        return np.isnan(values)
    return values == sentinel(dtype)


def random_array(rng: np.random.Generator, dtype: str, size: int) -> np.ndarray:
    """Never zero: magnitudes in [0.5, 1.5] for floats, [1, 100) for integers, random signs.

    Floats are drawn in float32 (float64 only for float64 arrays) and signed in place: a
    2**26-element input takes well under a second, which the GPU's perf cases need."""
    dtype_ = np.dtype(dtype)
    if dtype_.kind == "f":
        values = rng.random(size, dtype=np.float64 if dtype_.itemsize > 4 else np.float32)
        values += 0.5
    elif dtype_.kind in "iu":
        values = rng.integers(1, 100, size, dtype=np.int64 if dtype_.kind == "i" else np.uint64)
    else:
        raise SpecError(f"no default inputs for dtype {dtype}; give the spec an inputs= function")
    if dtype_.kind != "u":
        _negate_where(values, rng.integers(0, 2, size, dtype=np.uint8))
    return values.astype(dtype_, copy=False)


def _negate_where(values: np.ndarray, signs: np.ndarray) -> None:
    """Negate ``values`` in place where ``signs`` is 1 (``signs`` is used up).

    Floats get their sign bit flipped, which is what negation does, bit for bit: the same
    values as ``np.negative(..., where=...)``, about six times faster on 2**26 elements."""
    itemsize = values.dtype.itemsize
    if values.dtype.kind == "f" and sys.byteorder == "little" and values.size:
        top: np.ndarray = values.view(np.uint8)[itemsize - 1 :: itemsize]  # the byte holding the sign bit
        np.bitwise_xor(top, np.left_shift(signs, 7, out=signs), out=top)
    else:
        np.negative(values, out=values, where=signs.view(bool))


def array_size(array: Array, case: Case) -> int:
    size = int(evaluate(array.size, case))
    if size < 0:
        raise SpecError(f"array {array.name} has size {array.size} = {size} for case {dict(case)}")
    return size


def array_shape(array: Array, case: Case) -> tuple[int, ...]:
    if array.shape is None:
        return (array_size(array, case),)
    return tuple(int(evaluate(e, case)) for e in array.shape)


def arrays(spec: Spec) -> tuple[Array, ...]:
    return tuple(a for a in spec.args if isinstance(a, Array))


def make_inputs(spec: Spec, case: Case, seed: int) -> dict[str, np.ndarray]:
    """Every array read by the kernel (intent ``in`` or ``inout``), flat, by name."""
    rng = np.random.default_rng(seed)
    custom = spec.inputs(rng, case) if spec.inputs else {}
    inputs = {}
    for array in arrays(spec):
        if array.intent == "out":
            continue
        size = array_size(array, case)
        data = custom[array.name] if array.name in custom else random_array(rng, array.dtype, size)
        data = np.ascontiguousarray(data, dtype=array.dtype).reshape(-1)
        if data.size != size:
            raise SpecError(f"inputs() gave {array.name} {data.size} elements, its size is {size}")
        inputs[array.name] = data
    return inputs


def program(spec: Spec, source: str, case: Case) -> Program:
    defines = tuple((name, _define(evaluate(value, case))) for name, value in spec.defines.items())
    return Program(source=source, filename=f"{spec.name}.cu", kernel=spec.kernel, defines=defines)


def _define(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class Prepared:
    """A launch ready to run, and what the checks need to judge its outputs."""

    launch: Launch
    inputs: dict[str, np.ndarray]  # the contents of every array the kernel reads, before the launch
    ref: GroupCase
    expected: dict[str, np.ndarray] | None = None  # reference_outputs(inputs), when drawn ahead


def prepare_with_expected(spec: Spec, source: str, ref: GroupCase, time_limit_s: float) -> Prepared:
    """:func:`prepare` and the numpy reference's outputs on its inputs, ready for the comparison
    (the grading side draws a big case's both ahead, in the background)."""
    prepared = prepare(spec, source, ref, time_limit_s)
    return replace(prepared, expected=reference_outputs(spec, ref.case, prepared.inputs))


@dataclass(frozen=True)
class GroupCase:
    """One case of a case group, with the seed its inputs are drawn from."""

    group: str
    index: int
    case: Case
    seed: int


def group_cases(spec: Spec, group: str, secret: int, input_set: int = 0) -> list[GroupCase]:
    """The cases of ``group`` (those listed, then those drawn: ``with_drawn``) with their seeds for
    the run with ``secret`` (grading: input set 0)."""
    every = (*spec.cases[group], *spec.drawn.get(group, ()))
    return [
        GroupCase(group, index, case, case_seed(secret, spec.name, group, index, input_set))
        for index, case in enumerate(every)
    ]


def is_drawn(spec: Spec, group: str, index: int) -> bool:
    """Whether case ``index`` of ``group`` is one the group drew (it lists the others)."""
    return index >= len(spec.cases[group])


def with_drawn(spec: Spec, secret: int) -> Spec:
    """``spec`` with the cases each group draws (``Spec.draws``) for the run with ``secret``:
    the same cases for the same secret, other sizes for another."""
    listed: dict[str, set[int | float]] = {}
    for case in (c for cases in spec.cases.values() for c in cases):
        for name, value in case.items():
            listed.setdefault(name, set()).add(value)
    drawn = {}
    for group, draws in spec.draws.items():
        digest = hashlib.sha256(f"{secret}/{spec.name}/{group}/drawn".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        drawn[group] = tuple(_drawn(draw, listed, rng) for draw in draws for _ in range(draw.count))
    return replace(spec, drawn=drawn)


def _drawn(draw: Draw, listed: dict[str, set[int | float]], rng: np.random.Generator) -> Case:
    case = dict(draw.like)
    for name, (low, high) in draw.sizes.items():
        tile = int(evaluate(draw.tile[name], draw.like)) if name in draw.tile else None
        for value in map(int, rng.integers(low, high, DRAW_TRIES, endpoint=True)):
            if value not in listed.get(name, ()) and (tile is None or (value % tile == 0) == draw.aligned):
                case[name] = value
                break
        else:
            raise SpecError(f"no size {name} in [{low}, {high}] that no case lists and that fits its tile")
    return case


def find_case(spec: Spec, case: Case, secret: int) -> GroupCase:
    """``case`` as grading with ``secret`` draws it when a case group has it (listed, or drawn
    with that secret), else a case of its own."""
    spec = with_drawn(spec, secret)
    for group in spec.cases:
        for ref in group_cases(spec, group, secret):
            if dict(ref.case) == dict(case):
                return ref
    return GroupCase("custom", 0, case, case_seed(secret, spec.name, "custom", 0))


def prepare_group(
    spec: Spec, source: str, group: str, secret: int, time_limit_s: float, input_set: int = 0
) -> Iterator[Prepared]:
    """Every case of ``group`` in order, as the grading run with ``secret`` runs it.

    Lazy: a case's arrays are made when it is reached, so one big case is in memory at a time.
    """
    return (prepare(spec, source, ref, time_limit_s) for ref in group_cases(spec, group, secret, input_set))


def timing_requests(
    spec: Spec,
    sources: dict[str, str],
    group: str,
    secret: int,
    time_limit_s: float,
    input_sets: int = TIMING_INPUT_SETS,
) -> Iterator[TimingRequest]:
    """One request per case of ``group``: the student's launches on ``input_sets`` fresh input sets.

    A case's input sets are drawn at the same time, each in a thread of its own (each set has
    its own seed, so the values are those drawn one after another; numpy's generators and
    array operations release the GIL), and the next case's while the caller times this one.
    """
    sets = [group_cases(spec, group, secret, k) for k in range(1, input_sets + 1)]

    def request(refs: tuple[GroupCase, ...]) -> TimingRequest:
        drawing = [Background(prepare, spec, sources["student"], ref, time_limit_s) for ref in refs]
        prepared = [d.result() for d in drawing]
        case = refs[0].case
        return TimingRequest(
            student=tuple(p.launch for p in prepared),
            reference=program(spec, sources["reference"], case),
            case=dict(case),
            rtol=float(evaluate(spec.tolerance.rtol, case)),
            atol=float(evaluate(spec.tolerance.atol, case)),
        )

    per_case = list(zip(*sets, strict=True))
    if not per_case:
        return
    following = Background(request, per_case[0])
    for refs in per_case[1:]:
        current = following.result()
        following = Background(request, refs)
        yield current
    yield following.result()


class Background(Generic[T]):
    """``function(*args)`` computed in a daemon thread (an exit never waits for it); ``result()``
    waits for it and returns its value or raises its exception."""

    def __init__(self, function: Callable[..., T], *args: object):
        self._done = threading.Event()
        self._value: T  # set by _run unless it sets _error
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(function, args), daemon=True).start()

    def _run(self, function: Callable[..., T], args: tuple[object, ...]) -> None:
        try:
            self._value = function(*args)
        except BaseException as e:  # handed to whoever asks for the result
            self._error = e
        finally:
            self._done.set()

    def wait(self) -> None:
        """Wait until it is done (its value or exception is left for ``result``)."""
        self._done.wait()

    def result(self) -> T:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


def prepare(
    spec: Spec, source: str, ref: GroupCase, time_limit_s: float, inputs: dict[str, np.ndarray] | None = None
) -> Prepared:
    """Evaluate sizes, scalars, defines and geometry for the case and build the launch; ``inputs``:
    the case's, drawn already for another source's launch of it (the launch gets copies)."""
    case = ref.case
    inputs = make_inputs(spec, case, ref.seed) if inputs is None else inputs
    args: list[Buffer | ScalarArg] = []
    for arg in spec.args:
        if isinstance(arg, Array):
            args.append(_buffer(arg, case, inputs))
        else:
            args.append(ScalarArg(arg.name, evaluate(arg.value, case), arg.dtype))
    launch = replace(bare_launch(spec, source, case, time_limit_s), args=tuple(args))
    return Prepared(launch=launch, inputs=inputs, ref=ref)


def bare_launch(spec: Spec, source: str, case: Case, time_limit_s: float) -> Launch:
    """The case's program and geometry, without arguments: no inputs are drawn (what the
    compiler gives the kernel and its occupancy need no more)."""
    return Launch(
        program=program(spec, source, case),
        grid=dim3(spec.grid, case),
        block=dim3(spec.block, case),
        args=(),
        shared_bytes=int(evaluate(spec.shared_bytes, case)),
        time_limit_s=min(spec.time_limit_s, time_limit_s),
    )


def _buffer(array: Array, case: Case, inputs: dict[str, np.ndarray]) -> Buffer:
    if array.name in inputs:
        return Buffer(array.name, inputs[array.name].copy(), is_output=array.intent == "inout")
    poisoned: np.ndarray = np.full(array_size(array, case), sentinel(array.dtype), dtype=array.dtype)
    return Buffer(array.name, poisoned, is_output=True)


def reference_outputs(spec: Spec, case: Case, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The spec's numpy reference in float64, outputs flattened, by name."""
    kwargs: dict[str, np.ndarray | int | float] = {}
    for arg in spec.args:
        if isinstance(arg, Array) and arg.name in inputs:
            kwargs[arg.name] = inputs[arg.name].astype(np.float64).reshape(array_shape(arg, case))
        elif not isinstance(arg, Array):
            kwargs[arg.name] = evaluate(arg.value, case)
    try:
        outputs = spec.reference(**kwargs)
    except Exception as e:
        raise SpecError(f"{spec.name}: the numpy reference failed on case {dict(case)}: {e!r}") from e
    _check_reference_names(spec, outputs)
    flat = {name: np.asarray(value, dtype=np.float64).reshape(-1) for name, value in outputs.items()}
    for array in arrays(spec):
        if array.name in flat and flat[array.name].size != array_size(array, case):
            raise SpecError(
                f"{spec.name}: the numpy reference returns {flat[array.name].size} value"
                f"{'s' if flat[array.name].size != 1 else ''} of {array.name}; {array.name} has "
                f"{array_size(array, case)} elements (case {dict(case)})"
            )
    return flat


def _check_reference_names(spec: Spec, outputs: Mapping[str, object]) -> None:
    """Every ``out`` array returned, nothing else: an output left out would go unchecked."""
    names = {a.name for a in arrays(spec) if a.intent != "in"}
    missing = [a.name for a in arrays(spec) if a.intent == "out" and a.name not in outputs]
    unknown = [name for name in outputs if name not in names]
    if missing or unknown:
        raise SpecError(
            f"{spec.name}: the numpy reference must return every output array by name; it returns "
            f"{sorted(outputs)}"
            + "".join(f", not output {n}" for n in missing)
            + "".join(f", and {n!r}, which is no output array" for n in unknown)
        )
