import pytest

from autograder.course.spec import SpecError, dim3, evaluate, load_spec, load_specs

GOOD = """
from autograder.course.spec import Array, Spec
SPEC = Spec(name="{name}", kernel="k", args=(Array("x", "n"),), block=("T",), grid=("cdiv(n, T)",),
            cases={{"aligned": ({{"n": 64, "T": 32}},)}}, reference=lambda x: {{"x": x}})
"""


def write_spec(root, folder, text):
    (root / "assignments" / folder).mkdir(parents=True)
    (root / "assignments" / folder / "spec.py").write_text(text)


def test_expressions():
    case = {"n": 1000, "T": 256}
    assert evaluate("cdiv(n, T)", case) == 4 and evaluate("n + 4", case) == 1004
    assert evaluate("min(n, 2 ** 4) * -1", case) == -16 and evaluate(7, case) == 7
    assert dim3(("T", "2"), case) == (256, 2, 1)


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("m + 1", "unknown parameter 'm'"),
        ("n +", "cannot evaluate"),
        ("__import__('os')", "unsupported syntax"),
        ("n / 0", "division by zero"),
        ("n.real", "unsupported syntax"),
        ("10.0 ** 400", "out of range"),
        ("1e400", "not a finite number"),
        ("sqrt(-n)", "math domain error"),
    ],
)
def test_bad_expressions_name_themselves(expression, words):
    with pytest.raises(SpecError, match="cannot evaluate") as error:
        evaluate(expression, {"n": 1})
    assert words in str(error.value) and repr(expression) in str(error.value)


def test_load_specs_finds_every_spec(tmp_path):
    write_spec(tmp_path, "b", GOOD.format(name="b"))
    write_spec(tmp_path, "a", GOOD.format(name="a"))
    (tmp_path / "assignments" / "notes").mkdir()
    assert list(load_specs(tmp_path)) == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (GOOD.format(name="other"), "SPEC.name is 'other', the folder is 'a'"),
        ("SPEC = 3\n", "defines no SPEC = Spec(...)"),
        ("import numpy as np\nSPEC = np.nope\n", "AttributeError"),
        ("def broken(:\n", "SyntaxError"),
        (
            GOOD.format(name="a").replace('{"aligned"', '{"safety": (), "aligned"'),
            "case group 'safety' has no cases",
        ),
        (
            GOOD.format(name="a").replace('block=("T",)', 'block=("T", "1", "1", "1")'),
            "block has 4 expressions; at most three",
        ),
    ],
)
def test_spec_errors_name_the_file(tmp_path, text, words):
    write_spec(tmp_path, "a", text)
    with pytest.raises(SpecError) as error:
        load_spec(tmp_path / "assignments" / "a")
    assert str(error.value).startswith(str(tmp_path / "assignments" / "a" / "spec.py"))
    assert words in str(error.value)


def test_an_infinite_size_or_geometry_is_a_spec_error():
    with pytest.raises(SpecError, match="not a finite number"):
        dim3(("n * 1e308 * 10",), {"n": 1})


def test_geometry_of_more_than_three_expressions_is_a_spec_error():
    """Not a four-element "dim3" that the backends would read as a launch of the student's."""
    with pytest.raises(SpecError, match="at most three expressions"):
        dim3(("T", "1", "1", "1"), {"T": 32})


def test_a_course_without_assignments_is_a_spec_error_naming_the_folder(tmp_path):
    with pytest.raises(SpecError, match=r"assignments: no such folder"):
        load_specs(tmp_path)
