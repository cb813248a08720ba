"""lecturelib.check refuses bad input (as opposed to a failed check, an AssertionError) with a
message that names the argument, what was expected and what was given."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib import check

X = torch.zeros(2, 3)

CASES = [
    (lambda: check.claim("", True), TypeError, r"claim\(\): says must be the sentence"),
    (lambda: check.claim("a is below b", 0.5), TypeError,
     r"claim\(\): holds must be a bool \(a comparison\); got float"),
    (lambda: check.claim("a is below b", torch.tensor([True, False])), TypeError,
     r"holds must be one truth value; got a torch.bool tensor of shape \(2,\)"),
    (lambda: check.compare(1.0, "2", lower="below", higher="above"), TypeError,
     r"compare\(\): b must be a real number; got '2'"),
    (lambda: check.compare(math.nan, 2.0, lower="below", higher="above"), ValueError,
     r"compare\(\): a is NaN"),
    (lambda: check.compare(1.0, 2.0, lower="", higher="above"), TypeError,
     r"compare\(\): lower must be a non-empty str"),
    (lambda: check.compare(1.0, 2.0, lower="below", higher="above", within=-1), ValueError,
     r"within must be >= 0; got -1"),
    (lambda: check.shape([[1, 2]], "b t"), TypeError,
     r"shape\(\): x must be a torch.Tensor; got list"),
    (lambda: check.shape(X, ["b", "t"]), TypeError,
     r"axes must be a str of axis names such as 'b t d'; got list"),
    (lambda: check.shape(X, "b t", b=2.0), ValueError,
     r"the size of axis 'b' must be an int >= 0; got float 2.0"),
    (lambda: check.shape(X, "b t", t=True), ValueError,
     r"axis 't' must be an int >= 0; got bool True"),
    (lambda: check.shape(X, "b t", b=-2), ValueError, r"axis 'b' must be an int >= 0; got int -2"),
    (lambda: check.shape(X, "b t", h=4), ValueError, r"sizes given for axes not in 'b t': \['h'\]"),
    (lambda: check.max_abs_diff([0.0], torch.zeros(1)), TypeError,
     r"max_abs_diff\(\): a must be a torch.Tensor; got list"),
    (lambda: check.max_abs_diff(torch.zeros(1), 0.0), TypeError,
     r"b must be a torch.Tensor; got float"),
    (lambda: check.max_abs_diff(torch.zeros(2), torch.zeros(3)), ValueError,
     r"a and b must have one shape; got \(2,\) vs \(3,\)"),
    (lambda: check.close([0.0, 0.0], torch.zeros(2)), TypeError,
     r"close\(\): actual must be a torch.Tensor; got list"),
    (lambda: check.close(torch.zeros(2), (0.0, 0.0)), TypeError,
     r"expected must be a torch.Tensor; got tuple"),
    (lambda: check.close(X, X, atol=-1e-3), ValueError, r"atol must be a number >= 0; got -0.001"),
    (lambda: check.close(X, X, rtol=math.nan), ValueError, r"rtol must be a number >= 0; got nan"),
    (lambda: check.close(X, X, atol="1e-5"), TypeError, r"atol must be a real number; got str"),
    (lambda: check.close(X, X, rtol=None), TypeError, r"rtol must be a real number; got NoneType"),
    (lambda: check.close(X, X, atol=torch.tensor(1e-3)), TypeError,
     r"atol must be a real number; got Tensor"),
    (lambda: check.close(X, X, name=3), TypeError, r"name must be a str; got int"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
