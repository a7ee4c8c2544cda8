import dataclasses

import numpy as np
import pytest

from autograder.contract import Buffer, Scalar
from autograder.course.cases import (
    Background,
    GroupCase,
    case_seed,
    find_case,
    group_cases,
    is_drawn,
    make_inputs,
    prepare,
    prepare_group,
    random_array,
    reference_outputs,
    sentinel,
    with_drawn,
)
from autograder.course.folder import read_course
from autograder.course.spec import Array, Draw, Spec, SpecError, load_spec
from autograder.course.spec import Scalar as ScalarSpec

SPEC = Spec(
    name="mix",
    kernel="mix",
    args=(
        Array("x", "n + 4"),
        Array("k", "n", dtype="int32"),
        Array("y", "n", intent="out"),
        Array("z", "n", dtype="int32", intent="out"),
        Array("w", "n", intent="inout"),
        ScalarSpec("n", "n"),
    ),
    block=("T",),
    grid=("cdiv(n, T)",),
    defines={"BLOCK": "T", "HALF": "T / 2"},
    cases={"aligned": ({"n": 1000, "T": 64},)},
    reference=lambda **kw: {"y": kw["x"][:-4], "z": kw["k"], "w": kw["w"]},
    shared_bytes="T * 4",
    time_limit_s=30,
)
CASE = {"n": 1000, "T": 64}


def test_seeds_differ_by_secret_and_case_and_repeat_exactly():
    seeds = {
        case_seed(s, "mix", g, i, repeat)
        for s in (1, 2)
        for g in ("aligned", "ragged")
        for i in (0, 1)
        for repeat in (0, 1)
    }
    assert len(seeds) == 16
    assert case_seed(7, "mix", "aligned", 0) == case_seed(7, "mix", "aligned", 0)


def test_a_group_draws_the_input_set_asked_for_and_grading_draws_set_0():
    spec = dataclasses.replace(SPEC, cases={"g": (CASE, {"n": 10, "T": 64})})
    for input_set in (0, 2):
        prepared = list(prepare_group(spec, "src", "g", 7, 20, input_set))
        seeds = [case_seed(7, "mix", "g", index, input_set) for index in (0, 1)]
        assert [p.ref.seed for p in prepared] == seeds
        assert [r.seed for r in group_cases(spec, "g", 7, input_set)] == seeds
        assert np.array_equal(prepared[1].inputs["x"], make_inputs(spec, {"n": 10, "T": 64}, seeds[1])["x"])
    grading = [case_seed(7, "mix", "g", index, 0) for index in (0, 1)]
    assert [p.ref.seed for p in prepare_group(spec, "src", "g", 7, 20)] == grading
    assert [r.seed for r in group_cases(spec, "g", 7)] == grading


def test_profile_finds_a_graded_case_with_its_grading_seed_and_draws_others_apart():
    spec = dataclasses.replace(SPEC, cases={"g": (CASE,), "safety": ({"n": 10, "T": 64}, {"n": 33, "T": 32})})
    assert find_case(spec, {"T": 32, "n": 33}, 9) == group_cases(spec, "safety", 9)[1]
    custom = find_case(spec, {"n": 5, "T": 32}, 9)
    assert (custom.group, custom.seed) == ("custom", case_seed(9, "mix", "custom", 0))


def test_default_inputs_are_never_zero_and_signed():
    inputs = make_inputs(SPEC, CASE, seed=3)
    assert set(inputs) == {"x", "k", "w"}
    x = inputs["x"]
    assert x.dtype == np.float32 and x.size == 1004
    assert (np.abs(x) >= 0.5).all() and (np.abs(x) < 1.5).all()
    assert (x < 0).any() and (x > 0).any()
    k = inputs["k"]
    assert k.dtype == np.int32 and (k != 0).all() and (np.abs(k) < 100).all()


def test_inputs_are_fresh_per_seed():
    assert not np.array_equal(make_inputs(SPEC, CASE, 1)["x"], make_inputs(SPEC, CASE, 2)["x"])
    assert np.array_equal(make_inputs(SPEC, CASE, 1)["x"], make_inputs(SPEC, CASE, 1)["x"])


def test_prepare_poisons_outputs_and_evaluates_the_case():
    prepared = prepare(SPEC, "src", GroupCase("g", 0, CASE, seed=5), time_limit_s=20)
    launch = prepared.launch
    assert launch.grid == (16, 1, 1) and launch.block == (64, 1, 1) and launch.shared_bytes == 256
    assert launch.time_limit_s == 20
    assert launch.program.defines == (("BLOCK", "64"), ("HALF", "32"))
    assert launch.program.filename == "mix.cu" and launch.program.kernel == "mix"
    args = {a.name: a for a in launch.args}
    assert isinstance(args["n"], Scalar) and args["n"].value == 1000
    assert np.isnan(args["y"].data).all() and args["y"].is_output and args["y"].data.size == 1000
    assert (args["z"].data == sentinel(np.int32)).all() and args["z"].data.dtype == np.int32
    assert args["w"].is_output and np.array_equal(args["w"].data, prepared.inputs["w"])
    assert not args["x"].is_output and isinstance(args["x"], Buffer)
    args["x"].data[0] = 99  # the launch holds a copy: the inputs kept for comparison stay intact
    assert prepared.inputs["x"][0] != 99


def test_custom_inputs_and_their_size_check():
    spec = Spec(**{**SPEC.__dict__, "inputs": lambda rng, case: {"k": np.arange(1, case["n"] + 1)}})
    assert make_inputs(spec, CASE, 0)["k"][-1] == 1000
    bad = Spec(**{**SPEC.__dict__, "inputs": lambda rng, case: {"k": np.ones(3)}})
    with pytest.raises(Exception, match="inputs\\(\\) gave k 3 elements, its size is 1000"):
        make_inputs(bad, CASE, 0)


def test_reference_gets_float64_shaped_inputs():
    inputs = make_inputs(SPEC, CASE, 0)
    out = reference_outputs(SPEC, CASE, inputs)
    assert out["y"].dtype == np.float64 and np.array_equal(out["y"], inputs["x"][:-4])


@pytest.mark.parametrize("returned", [{"Y": 1.0, "z": 1, "w": 1.0}, {"z": 1, "w": 1.0}])
def test_a_reference_that_misses_an_output_is_a_spec_error_not_an_unchecked_output(returned):
    reference = lambda **kw: {k: np.full(1000, v) for k, v in returned.items()}  # noqa: E731
    spec = dataclasses.replace(SPEC, reference=reference)
    inputs = make_inputs(spec, CASE, 1)
    with pytest.raises(SpecError, match="output y"):
        reference_outputs(spec, CASE, inputs)


def test_a_reference_output_of_the_wrong_size_is_a_spec_error_not_a_broadcast():
    reference = lambda **kw: {"y": np.float64(1.0), "z": kw["k"], "w": kw["w"]}  # noqa: E731
    spec = dataclasses.replace(SPEC, reference=reference)
    with pytest.raises(SpecError, match="1 value of y; y has 1000"):
        reference_outputs(spec, CASE, make_inputs(spec, CASE, 1))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int8", "uint32"])
@pytest.mark.parametrize("size", [0, 1, 7, 100_003])
def test_random_arrays_are_those_of_a_plain_negation(dtype, size):
    """The sign bit flipped in place gives the very values np.negative(where=...) gave."""
    ours = random_array(np.random.default_rng(size), dtype, size)
    rng = np.random.default_rng(size)
    kind = np.dtype(dtype)
    if kind.kind == "f":
        plain = rng.random(size, dtype=np.float64 if kind.itemsize > 4 else np.float32) + 0.5
    else:
        plain = rng.integers(1, 100, size, dtype=np.int64 if kind.kind == "i" else np.uint64)
    if kind.kind != "u":
        np.negative(plain, out=plain, where=rng.integers(0, 2, size, dtype=np.uint8).view(bool))
    plain = plain.astype(dtype)
    assert ours.dtype == plain.dtype and ours.tobytes() == plain.tobytes()
    assert size == 0 or (ours != 0).all()


def test_a_background_result_is_its_value_or_its_exception():
    assert Background(sum, [1, 2, 3]).result() == 6
    failing = Background(lambda: 1 / 0)
    failing.wait()  # waits without raising
    with pytest.raises(ZeroDivisionError):
        failing.result()


DRAWING = dataclasses.replace(
    SPEC,
    cases={
        "aligned": ({"n": 1024, "T": 64}, {"n": 128, "T": 32}),
        "safety": ({"n": 1, "T": 32}, {"n": 70, "T": 32}),
    },
    draws={
        "aligned": (Draw({"T": 64}, {"n": (64, 4096)}, {"n": "T"}, aligned=True),),
        "safety": (Draw({"T": 32}, {"n": (2, 100)}, {"n": "T"}, count=20),),
    },
)


def test_a_group_draws_sizes_from_the_seed_within_the_bounds_no_case_lists_and_ragged():
    drawn = with_drawn(DRAWING, 7)
    listed = {1024, 128, 1, 70}
    safety = drawn.drawn["safety"]
    assert len(safety) == 20 and all(c["T"] == 32 for c in safety)
    assert all(2 <= c["n"] <= 100 and c["n"] % 32 and c["n"] not in listed for c in safety)
    [aligned] = drawn.drawn["aligned"]
    assert aligned["n"] % 64 == 0 and 64 <= aligned["n"] <= 4096 and aligned["n"] not in listed
    assert with_drawn(DRAWING, 7) == drawn  # reproducible from the seed
    assert {c["n"] for c in with_drawn(DRAWING, 8).drawn["safety"]} != {c["n"] for c in safety}


def test_a_group_runs_its_listed_cases_then_those_it_drew_each_with_its_own_seed():
    spec = with_drawn(DRAWING, 7)
    refs = group_cases(spec, "safety", 7)
    assert [dict(r.case) for r in refs] == [*map(dict, DRAWING.cases["safety"]), *spec.drawn["safety"]]
    assert [r.seed for r in refs] == [case_seed(7, "mix", "safety", i) for i in range(22)]
    assert [is_drawn(spec, "safety", r.index) for r in refs] == [False] * 2 + [True] * 20
    assert len(group_cases(DRAWING, "safety", 7)) == 2  # a spec as written: its listed cases only


def test_profile_finds_a_drawn_case_with_the_seed_that_drew_it():
    drawn = with_drawn(DRAWING, 9).drawn["safety"][3]
    found = find_case(DRAWING, drawn, 9)
    assert (found.group, found.index, found.seed) == ("safety", 5, case_seed(9, "mix", "safety", 5))


def test_bounds_no_size_fits_are_a_spec_error():
    tight = dataclasses.replace(DRAWING, draws={"safety": (Draw({"T": 32}, {"n": (64, 64)}, {"n": "T"}),)})
    with pytest.raises(SpecError, match=r"no size n in \[64, 64\]"):
        with_drawn(tight, 7)


@pytest.mark.parametrize(
    ("draw", "message"),
    [
        ("Draw({'T': 32}, {'n': (2, 9)}, group='nope')", "no such group"),
        ("Draw({}, {'n': (2, 9)})", "like and sizes must name each of"),
        ("Draw({'T': 32}, {'n': (9, 2)})", "1 <= low <= high"),
        ("Draw({'T': 32}, {'n': (2, 9)}, {'T': '4'})", "not a size"),
    ],
)
def test_a_malformed_draw_fails_when_the_spec_loads(tmp_path, draw, message):
    group = "nope" if "group=" in draw else "g"
    draw = draw.replace(", group='nope'", "")
    folder = tmp_path / "mix"
    folder.mkdir()
    (folder / "spec.py").write_text(
        "from autograder.course.spec import Array, Draw, Scalar, Spec\n"
        "SPEC = Spec(name='mix', kernel='mix', args=(Array('y', 'n', intent='out'), Scalar('n', 'n')),\n"
        "    block=('T',), grid=('cdiv(n, T)',), cases={'g': ({'T': 32, 'n': 1},)},\n"
        f"    reference=lambda n: {{'y': 0}}, draws={{{group!r}: ({draw},)}})\n"
    )
    with pytest.raises(SpecError, match=message):
        load_spec(folder)


COURSE = read_course(__import__("pathlib").Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("name", sorted(COURSE.specs))
def test_every_group_of_every_assignment_draws_a_case_of_the_order_of_its_listed_ones(name):
    spec = COURSE.specs[name]
    drawn = with_drawn(spec, 2026).drawn
    assert set(drawn) == set(spec.cases), f"groups without a drawn case: {set(spec.cases) - set(drawn)}"
    for group, cases in drawn.items():
        largest = max(max(c.values()) for c in spec.cases[group])  # the emulator's time: of that order
        assert cases and all(max(c.values()) <= 2 * largest for c in cases), (group, cases)
