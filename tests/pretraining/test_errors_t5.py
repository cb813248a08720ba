"""Bad input to lecturelib.pretraining.t5's span helpers: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import t5

G = torch.Generator().manual_seed(0)

CASES = [
    (lambda: t5.random_partition(3, 5, G), ValueError,
     r"parts \(each >= 1, so at most total\) must be an int in 1..3; got int 5"),
    (lambda: t5.random_partition(3, 0, G), ValueError,
     r"parts \(each >= 1, so at most total\) must be an int in 1..3; got int 0"),
    (lambda: t5.random_partition(0, 1, G), ValueError,
     r"total must be an int >= 1; got int 0"),
    (lambda: t5.random_partition(4.0, 2, G), ValueError,
     r"total must be an int >= 1; got float 4.0"),
    (lambda: t5.split_spans([1, 2, 3], [False, True], [9, 8]), ValueError,
     r"corrupt must hold one flag per id \(3\); got 2"),
    (lambda: t5.split_spans(torch.tensor([1, 2]), [False, True], [9, 8]), TypeError,
     r"ids must be a list; got torch.int64 tensor of shape \(2,\)"),
    (lambda: t5.split_spans([1, 2], [False, True], None), TypeError,
     r"sentinels must be a list; got NoneType"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
