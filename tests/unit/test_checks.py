import math
from dataclasses import replace

import numpy as np
import pytest

from autograder.contract import Capabilities, Counters, Finding, LaunchResult
from autograder.course.cases import GroupCase, prepare
from autograder.course.rubric import Item
from autograder.course.spec import Array, Spec
from autograder.course.spec import Scalar as ScalarArg
from autograder.grading import compare
from autograder.grading.checks import barriers, bounds, correctness, describe, traffic
from autograder.grading.compare import CaseOutcome, OutputComparison, compare_output, compare_outputs


def item(check="correctness", cases="safety", points=2.0, **ratio):
    return Item("vec", check, cases, points, f"vec {check}", **ratio)


def outcome(correct=True, findings=(), backend="emulator", index=0, counters=None, error=None):
    output = OutputComparison("c", 10, 0, 0, 0.0, 0.0)
    if not correct:
        output = OutputComparison("c", 10, 3, 0, 0.5, 0.25, "c[7]", 2.5, 2.0)
    return CaseOutcome(
        "safety",
        index,
        {"n": 10},
        123,
        backend,
        error=error,
        outputs=(output,),
        findings=tuple(findings),
        counters=counters,
    )


class FakeRuns:
    """Grading on the safety backend (the emulator), or on another backend (a GPU) with ``grading_apart``."""

    def __init__(self, grading=(), safety=(), reference=(), grading_apart=False, elsewhere=()):
        self.lists = {"grading": list(grading), "safety": list(safety), "reference": list(reference)}
        self.grading_apart = grading_apart
        self.elsewhere = list(elsewhere)  # the student's launches of other case groups

    def student_outcomes(self):
        return [
            *self.lists["safety"],
            *(self.lists["grading"] if self.grading_apart else ()),
            *self.elsewhere,
        ]

    def outcomes(self, role, group):
        return self.lists[role]

    def capabilities(self, role):
        return Capabilities(measures_time=self.grading_apart and role == "grading")

    def why_untimed(self):
        return None if self.grading_apart else "needs a GPU"

    def same_backend(self, role, other):
        return not self.grading_apart or role == other

    def correctness_outcomes(self):
        return self.lists["grading"]


OOB = Finding(
    "out_of_bounds_write", "vec.cu:3: thread (5,0,0) of block (1,0,0) wrote c[10] past its end", line=3
)


def test_compare_output_reports_first_wrong_multidim_index_unwritten_and_errors():
    expected = np.arange(1, 13, dtype=np.float64)
    got = expected.astype(np.float32)
    got[7] = np.nan  # never written
    got[9] += 0.5  # wrong
    c = compare_output("C", got, expected, (3, 4), rtol=1e-6, atol=1e-6)
    assert (c.wrong, c.unwritten, c.first_wrong) == (2, 1, "C[1, 3]")
    assert math.isnan(c.got) and c.expected == 8.0
    assert c.max_abs_error == pytest.approx(0.5) and c.max_rel_error == pytest.approx(0.05)
    flat = compare_output("c", got, expected, (12,), 1e-6, 1e-6)
    assert flat.first_wrong == "c[7]"


def test_compare_output_tolerance_and_integer_sentinel():
    expected = np.array([1.0, 2.0, 3.0])
    assert compare_output("c", np.array([1.0, 2.0, 3.0000001], np.float32), expected, (3,), 1e-5, 1e-5).ok
    ints = np.array([1, np.iinfo(np.int32).min, 3], np.int32)
    c = compare_output("k", ints, expected, (3,), 0, 0)
    assert (c.wrong, c.unwritten, c.first_wrong) == (1, 1, "k[1]")


def test_compare_output_all_unwritten_has_no_max_error():
    c = compare_output("c", np.full(4, np.nan, np.float32), np.ones(4), (4,), 1e-5, 1e-5)
    assert (c.wrong, c.unwritten, c.max_abs_error) == (4, 4, None)


def test_correctness_scores_the_fraction_of_correct_cases():
    runs = FakeRuns(grading=[outcome(i != 1, index=i) for i in range(4)])
    result = correctness(item(points=4), runs)
    assert result.score == 3.0 and not result.passed
    assert "3 of 4 cases correct" in result.output and "3 of 10 values of c wrong" in result.output


def test_case_outcome_is_wrong_on_error_modified_input_or_unfinished_launch():
    assert outcome().correct
    assert not outcome(error="the kernel did not finish").correct
    assert not CaseOutcome("g", 0, {}, 0, "emulator", inputs_modified=("a",)).correct
    budget = Finding("instruction_budget", "the launch ran past its instruction budget")
    assert not outcome(findings=[budget]).correct


def test_bounds_is_gated_on_correctness_of_the_same_cases():
    empty_stub = FakeRuns(safety=[outcome(False)])
    result = bounds(item("bounds"), empty_stub)
    assert result.score == 0 and "not awarded" in result.output


def test_bounds_full_without_findings_zero_with_one():
    assert bounds(item("bounds"), FakeRuns(safety=[outcome(), outcome(index=1)])).score == 2.0
    result = bounds(item("bounds"), FakeRuns(safety=[outcome(), outcome(findings=[OOB], index=1)]))
    assert result.score == 0 and "wrote c[10] past its end" in result.output


def test_bounds_on_gpu_adds_the_gpu_canary_findings_to_the_emulators():
    runs = FakeRuns(safety=[outcome()], grading=[outcome(findings=[OOB], backend="gpu")], grading_apart=True)
    result = bounds(item("bounds"), runs)
    assert result.score == 0 and "[gpu]" not in result.output and "wrote c[10]" in result.output
    runs = FakeRuns(safety=[outcome(findings=[OOB])], grading=[outcome(backend="gpu")])
    assert bounds(item("bounds"), runs).score == 0


def test_a_finding_on_a_case_of_another_group_counts_and_names_that_case():
    ragged = replace(outcome(findings=[OOB], index=3), group="ragged", params={"n": 33})
    race = replace(outcome(findings=[Finding("shared_race", "a race", line=4)]), group="aligned")
    runs = FakeRuns(safety=[outcome(), outcome(index=1)], elsewhere=[ragged, race])
    result = bounds(item("bounds"), runs)
    assert result.score == 0, result.output
    assert result.output.endswith("wrote c[10] past its end (on case ragged n=33)"), result.output
    shown = [(c.group, c.index) for c in result.evidence.cases]
    assert shown == [("safety", 0), ("safety", 1), ("ragged", 3)]  # the item's cases, and where it was seen
    assert barriers(item("barriers"), runs).score == 0
    clean = FakeRuns(safety=[outcome()], elsewhere=[replace(outcome(index=2), group="ragged")])
    assert bounds(item("bounds"), clean).output.endswith("no bounds finding on 2 cases on emulator")
    gated = bounds(item("bounds"), FakeRuns(safety=[outcome(False)], elsewhere=[ragged]))
    assert "not awarded" in gated.output and "(on case ragged n=33)" in gated.output


def test_a_gated_item_still_shows_its_findings():
    result = bounds(item("bounds"), FakeRuns(safety=[outcome(False, findings=[OOB])]))
    assert result.score == 0 and "not awarded" in result.output
    assert "wrote c[10] past its end" in result.output


def test_barrier_findings_do_not_cost_bounds_points():
    race = Finding("shared_race", "a race", line=4)
    assert bounds(item("bounds"), FakeRuns(safety=[outcome(findings=[race])])).score == 2.0


def counted(value):
    return Counters(totals={"global_load_values": value})


@pytest.mark.parametrize(
    ("student", "reference", "score"),
    [(100, 100, 2.0), (90, 100, 2.0), (200, 100, 1.0), (400, 100, 0.0), (1000, 100, 0.0)],
)
def test_traffic_log_interpolates_the_ratio(student, reference, score):
    runs = FakeRuns(
        safety=[outcome(counters=counted(student))], reference=[outcome(counters=counted(reference))]
    )
    result = traffic(item("traffic", metric="global_load_values", full_at=1.0, zero_at=4.0), runs)
    assert result.score == pytest.approx(score)


def test_traffic_without_counters_is_flagged_not_crashed():
    runs = FakeRuns(safety=[outcome(counters=counted(1))], reference=[outcome(counters=None)])
    result = traffic(item("traffic", metric="global_load_values", full_at=1.0, zero_at=4.0), runs)
    assert result.score == 0 and result.regrade
    runs = FakeRuns(safety=[outcome(counters=counted(1))], reference=[outcome(counters=counted(1))])
    result = traffic(item("traffic", metric="sectors", full_at=1.0, zero_at=4.0), runs)
    assert result.regrade and "sectors" in result.output


def test_printf_output_is_shown_with_each_case_and_kept_short():
    printed = "".join(f"thread {t} says hi\n" for t in range(12))
    chatty = CaseOutcome(
        "safety",
        0,
        {"n": 10},
        123,
        "emulator",
        outputs=(OutputComparison("c", 10, 0, 0, 0.0, 0.0),),
        stdout=printed,
    )
    result = correctness(item(), FakeRuns(grading=[chatty]))
    assert "your kernel printed:\n    | thread 0 says hi\n" in result.output
    assert "thread 5 says hi" not in result.output and "... 7 more lines" in result.output
    assert result.evidence.cases[0].stdout == printed


def test_an_infinite_reference_value_is_matched_exactly_not_within_an_infinite_tolerance():
    expected = np.array([np.inf, -np.inf, np.inf, 1.0])
    right = np.array([np.inf, -np.inf, np.inf, 1.0], np.float32)
    assert compare_output("c", right, expected, (4,), 1e-5, 1e-5).ok
    for wrong_value in (1.0, -np.inf, np.float32(3e38)):
        got = right.copy()
        got[2] = wrong_value  # rtol * |inf| is inf: every value used to pass
        c = compare_output("c", got, expected, (4,), 1e-5, 1e-5)
        assert (c.wrong, c.first_wrong) == (1, "c[2]"), wrong_value


def test_an_untouched_input_holding_nan_is_not_reported_as_modified():
    spec = Spec(
        name="keep",
        kernel="keep",
        args=(Array("a", "n"), Array("c", "n", intent="out"), ScalarArg("n", "n")),
        block=("n",),
        grid=("1",),
        cases={"g": ({"n": 4},)},
        reference=lambda a, n: {"c": np.nan_to_num(a)},
        inputs=lambda rng, case: {"a": np.array([1.0, np.nan, 2.0, 3.0])},
    )
    case = spec.cases["g"][0]
    prepared = prepare(spec, "", GroupCase("g", 0, case, seed=1), time_limit_s=5)
    untouched = {"a": prepared.inputs["a"].copy(), "c": np.array([1.0, 0.0, 2.0, 3.0], np.float32)}
    assert compare_outputs(spec, prepared, LaunchResult(outputs=untouched))[1] == ()
    changed = {**untouched, "a": np.array([1.0, np.nan, 2.0, 4.0], np.float32)}
    assert compare_outputs(spec, prepared, LaunchResult(outputs=changed))[1] == ("a",)


def test_integer_outputs_are_exact_whatever_the_float_tolerance():
    expected = np.array([1_000_000.0, 7.0])
    off_by_one = np.array([1_000_001, 7], np.int32)  # within rtol 1e-5 of a million
    c = compare_output("count", off_by_one, expected, (2,), 1e-5, 1e-5)
    assert (c.wrong, c.first_wrong) == (1, "count[0]")
    assert compare_output("count", np.array([1_000_000, 7], np.int32), expected, (2,), 1e-5, 1e-5).ok


def case(n, findings=(), output=None, index=0):
    """A case of the safety group with its own ``n``, as the grader labels it."""
    ok = OutputComparison("c", n, 0, 0, 0.0, 0.0)
    return CaseOutcome(
        "safety", index, {"T": 32, "n": n}, 1, "emulator", outputs=(output or ok,), findings=tuple(findings)
    )


def past_the_end(n, others=0):
    message = f"vec.cu:3: thread (0,0,0) of block (0,0,0) wrote c[{n}] past its end"
    return Finding("out_of_bounds_write", message, line=3, array="c", others=others)


def test_each_finding_names_its_case_and_repeats_collapse_into_one_line_with_a_count():
    race = Finding("shared_race", "vec.cu:5: thread (1,0,0) of block (0,0,0) read s[1]", line=5, array="s")
    outcomes = [case(n, [past_the_end(n, others=2)], index=k) for k, n in enumerate((1, 1000, 2053))]
    outcomes.append(case(70, [race], index=3))
    result = bounds(item("bounds"), FakeRuns(safety=outcomes))
    repeated = [line for line in result.output.splitlines() if "past its end" in line]
    assert len(repeated) == 1, result.output
    assert repeated[0].endswith(
        "wrote c[1] past its end (and 2 other threads) "
        "(on 3 cases, the first shown: safety T=32, n=1; safety T=32, n=1000; safety T=32, n=2053)"
    )
    assert result.output.startswith("3 bounds findings on 3 cases:")
    assert "race" not in result.output  # a barriers finding is not a bounds finding
    single = barriers(item("barriers"), FakeRuns(safety=outcomes)).output
    assert single.splitlines() == [
        "1 barriers finding on 1 case:",
        "  vec.cu:5: thread (1,0,0) of block (0,0,0) read s[1] (on case safety T=32, n=70)",
    ]


def test_counts_say_one_thing_in_the_singular():
    one = case(1, output=OutputComparison("c", 1, 1, 0, 0.5, 0.25, "c[0]", 2.5, 2.0))
    result = correctness(item(), FakeRuns(grading=[one]))
    assert "0 of 1 case correct" in result.output and "1 of 1 value of c wrong" in result.output
    result = bounds(item("bounds"), FakeRuns(safety=[case(5, [past_the_end(5, others=1)])]))
    assert "(and 1 other thread)" in result.output and "threads" not in result.output
    chatty = replace(case(5), stdout="".join(f"line {k}\n" for k in range(6)))
    assert "... 1 more line\n" in correctness(item(), FakeRuns(grading=[chatty])).output + "\n"
    assert "(s)" not in result.output


def test_max_abs_error_is_never_shown_beside_nan_without_how_many_are_nan():
    expected = np.arange(1, 9, dtype=np.float64)
    got = expected.astype(np.float32)
    got[[2, 5]] = np.nan  # never written, or computed as NaN: the same to the grader
    got[6] = np.inf
    got[7] += 0.25
    comparison = compare_output("y", got, expected, (8,), 1e-5, 1e-5)
    assert (comparison.nan, comparison.infinite) == (2, 1)
    text = describe(case(8, output=comparison))
    assert "2 are NaN (never written, or computed as NaN); 1 is infinite" in text
    assert "max abs error 0.25, max rel error 0.0312 (over the other 5 values)" in text
    assert text.index("NaN") < text.index("max abs error")


def test_jargon_is_explained_once_where_it_first_appears():
    word = "vec.cu:7: thread (0,0,0) of block (0,0,0) read s[{}] (as 4-byte words) that no thread wrote"
    unset = [Finding("uninitialized_shared_read", word.format(k), line=7 + k, array="s") for k in range(2)]
    output = barriers(item("barriers"), FakeRuns(safety=[case(64, unset)])).output
    lines = output.splitlines()
    assert output.count('("as 4-byte words":') == 1  # two findings use it: explained once
    first = next(k for k, line in enumerate(lines) if "as 4-byte words" in line)
    assert lines[first + 1].strip().startswith('("as 4-byte words":')
    counts = Counters(totals={"shared_load_wavefronts": 64})
    runs = FakeRuns(
        safety=[replace(case(64), counters=counts)], reference=[replace(case(64), counters=counts)]
    )
    output = traffic(item("traffic", metric="shared_load_wavefronts", full_at=1.0, zero_at=4.0), runs).output
    assert '("shared_load_wavefronts":' in output and "bank conflict" in output


def _whole(got_raw, expected, rtol, atol):
    """compare_output's figures in one pass over the whole array (as it was before slicing)."""
    got = got_raw.astype(np.float64)
    never = np.isnan(got) if got_raw.dtype.kind == "f" else got_raw == np.iinfo(got_raw.dtype).min
    with np.errstate(invalid="ignore"):
        error = np.abs(got - expected)
        within = np.where(np.isfinite(expected), error <= atol + rtol * np.abs(expected), got == expected)
    wrong, written = never | ~within, ~never & np.isfinite(error)
    maxima = (None, None)
    if written.any():
        relative = error[written] / np.maximum(np.abs(expected[written]), 1e-30)
        maxima = (float(error[written].max()), float(relative.max()))
    first = int(np.argmax(wrong)) if wrong.any() else None
    counts = (
        int(wrong.sum()),
        int(never.sum()),
        int(np.isnan(got).sum()),
        int((~never & np.isinf(error)).sum()),
    )
    return counts, maxima, first


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_a_large_output_compared_in_slices_gives_the_figures_of_one_pass(dtype, monkeypatch):
    monkeypatch.setattr("autograder.grading.compare.CHUNK", 1000)  # 50 slices, on threads
    rng = np.random.default_rng(3)
    expected = np.round(rng.uniform(-50, 50, 50_000))
    got = expected.astype(dtype)
    sentinel = np.nan if dtype == "float32" else np.iinfo(np.int32).min
    got[[1234, 1235, 40_000]] = sentinel
    got[[7_777, 31_000]] += 1
    if dtype == "float32":
        got[20_000], expected[20_001], got[20_001] = np.inf, -np.inf, -np.inf
    c = compare_output("y", got, expected, (got.size,), rtol=1e-5, atol=1e-6)
    (wrong, unwritten, nan, infinite), (max_abs, max_rel), first = _whole(got, expected, 1e-5, 1e-6)
    assert (c.wrong, c.unwritten, c.nan, c.infinite) == (wrong, unwritten, nan, infinite)
    assert (c.max_abs_error, c.max_rel_error) == (max_abs, max_rel)
    assert c.first_wrong == f"y[{first}]" == "y[1234]"


def _drawn_slice(rng, dtype):
    """A slice a kernel could return against its float64 reference: within the tolerance or at its
    edge, of any magnitude its type holds (zeros, subnormals, 1e30) and sign; sometimes with one
    element wrong, NaN, infinite or unwritten."""
    size = int(rng.choice([1, 7, 4096, 70_000]))
    expected = rng.uniform(-2, 2, size) * 10.0 ** rng.choice(SCALES[dtype])
    expected[rng.random(size) < 0.05] = 0.0
    noise = 0.0 if dtype == "int32" else rng.choice([0, 1e-7, 1e-5])
    got = expected * (1 + rng.uniform(-1, 1, size) * noise)
    got = (np.round(got) if dtype == "int32" else got).astype(dtype)
    spoil, where = rng.integers(0, 8), int(rng.integers(0, size))
    if spoil == 1:
        got[where] += 1
    elif spoil == 2:
        got[where] = np.nan if got.dtype.kind == "f" else np.iinfo(got.dtype).min
    elif spoil == 3:
        expected[where] = np.inf
    elif spoil == 4 and got.dtype.kind == "f":
        got[where] = -np.inf
    return got, expected


SCALES = {"float16": [-3, 0, 3], "float32": [-40, -3, 0, 5, 30], "float64": [-310, 0, 300], "int32": [0, 5]}


def test_a_slice_all_within_the_tolerance_gets_the_figures_of_the_element_by_element_path():
    """``_all_within``, the fast path for a correct kernel's output, against ``_checked``, which
    looks at every element: the same figures on drawn slices, spoilt ones falling back to it."""
    rng = np.random.default_rng(27)
    fast = 0
    for _ in range(400):
        dtype = rng.choice(["float16", "float32", "float64", "int32"])
        got, expected = _drawn_slice(rng, dtype)
        rtol, atol = (0.0, 0.0) if got.dtype.kind == "i" else (1e-5, float(rng.choice([0.0, 1e-6])))
        as_float = got.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(as_float - expected)
            checked = compare._checked(got, as_float, expected, error, rtol, atol)
            assert compare._compare_slice(got, expected, rtol, atol) == checked
            fast += compare._all_within(got, expected, error, rtol, atol) is not None
    assert 100 < fast < 350  # both paths taken


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "complex64"])
def test_an_input_left_as_it_was_is_told_as_np_array_equal_tells_it(dtype):
    """``_unchanged``, the modified-inputs check's equality first, against ``np.array_equal`` with
    ``equal_nan`` for floats: the same answer on an input kept, changed in one element, holding
    NaN where it held NaN or elsewhere, -0.0 for 0.0, empty, or of another shape that broadcasts."""
    rng = np.random.default_rng(27)
    before = rng.uniform(-2, 2, 5000).astype(dtype)
    before[:3] = 0
    pairs = [(before.copy(), before), (before[:0].copy(), before[:0]), (before[:1], np.repeat(before[:1], 9))]
    changed = before.copy()
    changed[4321] += 1
    pairs.append((changed, before))
    if before.dtype.kind in "fc":
        holed = before.copy()
        holed[[7, 99]] = np.nan
        moved = holed.copy()
        moved[[7, 100]] = moved[[100, 7]]
        negated = before.copy()
        negated[:3] = -negated[:3]  # -0.0 where 0.0 was: equal
        pairs += [(holed.copy(), holed), (moved, holed), (negated, before)]
    for after, was in pairs:
        kept = np.array_equal(after, was, equal_nan=was.dtype.kind in "fc")
        assert compare._unchanged(after, was) == kept
    assert [compare._unchanged(a, w) for a, w in pairs[:4]] == [True, True, False, False]


def test_a_nan_output_names_the_undefined_read_of_the_same_launch_that_explains_it():
    read = Finding(
        "out_of_bounds_read",
        "vec.cu:4: thread (1,0,0) of block (9,0,0) read a[2450] past its end (a has 2450 elements)",
        line=4,
        array="a",
        index=2450,
        bound=2450,
    )
    unset = Finding("uninitialized_shared_read", "vec.cu:7: thread (0,0,0) read s[3] that no thread wrote")
    nan = OutputComparison("c", 2450, 1, 1, 0.0, 0.0, "c[2449]", math.nan, 2.0, nan=1)
    text = describe(case(2450, [read, unset], output=nan))
    assert "got nan, expected 2; 1 is NaN (never written, or computed as NaN)" in text
    assert text.endswith(
        "the same launch read a[2450] past its end on line 4 (bounds item): that read's value is undefined"
    )  # the first such read only: it names the finding, the bounds item lists the rest
    alone = describe(case(64, [unset], output=nan))
    assert alone.endswith(
        "the same launch reported: vec.cu:7: thread (0,0,0) read s[3] that no thread wrote (barriers item): "
        "that read's value is undefined"
    )
    assert "the same launch" not in describe(case(2450, [read]))  # right outputs: nothing to explain
