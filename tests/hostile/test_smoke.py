from .conftest import assert_sound, reference


def test_the_reference_is_sound(graded):
    result = graded({"vector_add.cu": reference("vector_add")})
    assert_sound(result)
    assert result.score("correctness (ragged)") == 4
