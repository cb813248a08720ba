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
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
