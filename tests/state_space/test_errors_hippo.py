"""Bad input to lecturelib.state_space.hippo: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.state_space import hippo

CASES = [
    (lambda: hippo.legs_matrices(0), ValueError, r"N must be an int >= 1; got int 0"),
    (lambda: hippo.legs_matrices(2.0), ValueError, r"N must be an int >= 1; got float 2.0"),
    (lambda: hippo.legs_nplr(-1), ValueError, r"N must be an int >= 1; got int -1"),
    (lambda: hippo.legs_scan(torch.ones(3, 2), 4), ValueError,
     r"f must be a 1-D float tensor of samples \(L,\); got torch.float32 tensor of shape "
     r"\(3, 2\)"),
    (lambda: hippo.legs_scan(torch.arange(5), 4), TypeError,
     r"f must be a 1-D float tensor of samples \(L,\); got torch.int64"),
    (lambda: hippo.legs_scan(torch.ones(0), 4), ValueError,
     r"f must hold at least one sample; got an empty tensor"),
    (lambda: hippo.legs_scan(torch.ones(5), 0), ValueError, r"N must be an int >= 1"),
    (lambda: hippo.legendre(0, torch.zeros(3)), ValueError,
     r"n_max must be an int >= 1; got int 0"),
    (lambda: hippo.legs_reconstruct(torch.ones(2, 3), torch.zeros(4)), ValueError,
     r"c must be a 1-D float tensor of N coefficients; got torch.float32 tensor of shape "
     r"\(2, 3\)"),
    (lambda: hippo.legs_reconstruct(torch.ones(3), [0.5]), TypeError,
     r"s must be a 1-D float tensor of relative times; got list"),
    (lambda: hippo.legs_reconstruct(torch.ones(3), torch.tensor([0.0, 1.5])), ValueError,
     r"s must lie in \[0, 1\] \(a fraction of the history\); got values from 0 to 1.5"),
    (lambda: hippo.legs_matrices(3, torch.long), TypeError,
     r"dtype must be a floating-point torch.dtype; got dtype torch.int64"),
    (lambda: hippo.legs_matrices(3, "float64"), TypeError,
     r"dtype must be a floating-point torch.dtype; got str 'float64'"),
    (lambda: hippo.legs_nplr(3, torch.cfloat), TypeError,
     r"dtype must be a floating-point torch.dtype; got dtype torch.complex64"),
    (lambda: hippo.legendre(3, torch.tensor([1, 0])), TypeError,
     r"x must be a float tensor \(P,\) of points in \[-1, 1\]; got torch.int64"),
    (lambda: hippo.legs_reconstruct(torch.ones(0), torch.zeros(2)), ValueError,
     r"c must hold at least one coefficient; got an empty tensor"),
    (lambda: hippo.legs_reconstruct(torch.ones(3), torch.tensor([0.5, float("nan")])),
     ValueError, r"s must lie in \[0, 1\] \(a fraction of the history\); got values "
     r"from 0.5 to 0.5, 1 NaN"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
