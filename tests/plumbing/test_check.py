"""lecturelib.check: named shapes and close comparisons, including their error messages."""

from __future__ import annotations

import doctest
import math

import pytest
import torch

from lecturelib import check


def test_shape_returns_the_named_sizes():
    assert check.shape(torch.zeros(2, 5, 8), "b t d", b=2, d=8) == {"b": 2, "t": 5, "d": 8}
    assert check.shape(torch.zeros(3, 4, 4), "b t t") == {"b": 3, "t": 4}
    assert check.shape(torch.tensor(1.0), "") == {}


def test_wrong_number_of_axes():
    with pytest.raises(AssertionError,
                       match=r"expected 3 axes \(b t d\), got 2 with shape \(2, 5\)"):
        check.shape(torch.zeros(2, 5), "b t d")


def test_wrong_size_names_the_axis():
    with pytest.raises(AssertionError) as err:
        check.shape(torch.zeros(2, 5, 8), "b t d", t=6)
    msg = str(err.value)
    assert "axis 't'" in msg and "should be 6, got 5" in msg and "(2, 5, 8)" in msg


def test_inconsistent_repeated_axis():
    with pytest.raises(AssertionError, match=r"axis 't' appears twice .* sizes 4 and 5"):
        check.shape(torch.zeros(3, 4, 5), "b t t")


def test_size_for_an_axis_that_is_not_there():
    with pytest.raises(ValueError, match=r"\['h'\]"):
        check.shape(torch.zeros(2, 3), "b t", h=4)


def test_shape_needs_a_tensor():
    with pytest.raises(TypeError):
        check.shape([[1, 2]], "b t")


def test_close_within_tolerance():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    check.close(x, x + 5e-6)
    check.close(x * 1000, x * 1000 * (1 + 5e-6))  # relative tolerance
    check.close(x, x + 1e-3, atol=2e-3)
    check.close(x.half(), x.half())  # dtypes are compared as float64
    check.close(torch.zeros(0), torch.zeros(0))


def test_close_reports_the_largest_difference_and_where():
    expected = torch.zeros(3, 4)
    actual = expected.clone()
    actual[0, 1] = 1e-3
    actual[2, 3] = 0.5
    with pytest.raises(AssertionError) as err:
        check.close(actual, expected, name="logits")
    msg = str(err.value)
    assert msg.startswith("logits: 2 of 12 elements differ")
    assert "largest |diff| 0.5 at index (2, 3)" in msg
    assert "actual 0.5, expected 0" in msg


def test_close_points_at_a_failing_element():
    """A big but tolerated difference must not hide the small one that fails."""
    with pytest.raises(AssertionError, match=r"at index \(1,\)"):
        check.close(torch.tensor([1e6, 1.0], dtype=torch.float64),
                    torch.tensor([1e6 + 1, 1.1], dtype=torch.float64))


def test_close_shape_mismatch():
    with pytest.raises(AssertionError, match=r"shapes differ, \(2, 3\) vs expected \(3, 2\)"):
        check.close(torch.zeros(2, 3), torch.zeros(3, 2))


def test_close_needs_tensors():
    with pytest.raises(TypeError, match="expected"):
        check.close(torch.zeros(2), [0.0, 0.0])


def test_nan_in_the_same_places_is_equal():
    check.close(torch.tensor([1.0, math.nan]), torch.tensor([1.0, math.nan]))


def test_nan_against_a_number_fails_and_is_shown():
    with pytest.raises(AssertionError, match=r"1 of 2 elements differ.*index \(1,\).*actual nan"):
        check.close(torch.tensor([1.0, math.nan]), torch.tensor([1.0, 2.0]))
    with pytest.raises(AssertionError, match="expected nan"):
        check.close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, math.nan]))


@pytest.mark.parametrize("actual, expected", [
    (math.inf, -math.inf), (5.0, math.inf), (math.inf, 1.7976931348623157e308),
])
def test_infinities_match_only_themselves(actual, expected):
    with pytest.raises(AssertionError, match="inf"):
        check.close(torch.tensor([actual], dtype=torch.float64),
                    torch.tensor([expected], dtype=torch.float64))


def test_equal_infinities_pass():
    check.close(torch.tensor([math.inf, -math.inf, 0.0]), torch.tensor([math.inf, -math.inf, 0.0]))


def test_max_abs_diff():
    assert check.max_abs_diff(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 0.0])) == 2.0
    assert check.max_abs_diff(torch.zeros(0), torch.zeros(0)) == 0.0
    with pytest.raises(ValueError):
        check.max_abs_diff(torch.zeros(2), torch.zeros(3))


def test_docstring_examples():
    assert doctest.testmod(check).failed == 0


def test_close_compares_the_imaginary_part_of_complex_tensors():
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    check.close(z, z.clone())
    check.close(z, z + 1e-7j)  # within tolerance on the imaginary part
    with pytest.raises(AssertionError, match=r"1 of 2 elements differ.*index \(1,\).*"
                                             r"actual 3\+4j, expected 3-4j"):
        check.close(torch.tensor([1 + 2j, 3 + 4j]), z)  # the real parts are equal
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        check.close(torch.tensor([1 + 1e-3j]), torch.tensor([1 + 0j]))


def test_close_reads_a_real_tensor_as_complex_with_zero_imaginary_part():
    check.close(torch.tensor([1.0, 2.0]), torch.tensor([1 + 0j, 2 + 0j]))
    with pytest.raises(AssertionError):
        check.close(torch.tensor([1.0, 2.0]), torch.tensor([1 + 0j, 2 + 1j]))


def test_complex_nan_and_max_abs_diff():
    check.close(torch.tensor([complex(1, math.nan)]), torch.tensor([complex(1, math.nan)]))
    with pytest.raises(AssertionError, match="actual 1\\+nanj"):
        check.close(torch.tensor([complex(1, math.nan)]), torch.tensor([1 + 0j]))
    assert check.max_abs_diff(torch.tensor([3 + 4j]), torch.tensor([0j])) == pytest.approx(5.0)


def test_nan_is_matched_element_by_element():
    """NaN in both at one place, NaN against a number at another: only the second differs."""
    with pytest.raises(AssertionError, match=r"^tensors: 1 of 2 elements differ.*index \(1,\)"):
        check.close(torch.tensor([math.nan, math.nan]), torch.tensor([math.nan, 1.0]))


def test_shape_takes_numpy_integer_sizes():
    import numpy as np

    assert check.shape(torch.zeros(2, 3), "b t", b=np.int64(2), t=3) == {"b": 2, "t": 3}


def test_a_claim_that_holds_passes_and_one_that_fails_names_sentence_and_values():
    check.claim("the GPT's loss is below the LSTM's", 1.52 < 1.60, gpt=1.52, lstm=1.60)
    check.claim("accuracy rose", torch.tensor(0.9) > torch.tensor(0.8))
    with pytest.raises(AssertionError) as err:
        check.claim("the GPT's loss is below the LSTM's", 1.70 < 1.60, gpt=1.7, lstm=1.6)
    assert "the GPT's loss is below the LSTM's" in str(err.value)
    assert "gpt=1.7, lstm=1.6" in str(err.value)


def test_compare_gives_the_word_of_the_measured_order():
    words = {"lower": "below", "higher": "above"}
    assert check.compare(4.8, 5.4, **words) == "below"
    assert check.compare(5.4, 4.8, **words) == "above"
    assert check.compare(2.09, 2.11, **words, same="level with", within=0.05) == "level with"
    assert check.compare(torch.tensor(1.0), 2, **words) == "below"
    with pytest.raises(AssertionError, match="no word for the same"):
        check.compare(2.0, 2.0, **words)
    with pytest.raises(AssertionError, match="no word for the same"):
        check.compare(2.09, 2.11, **words, within=0.05)
