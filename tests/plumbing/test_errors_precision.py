"""Bad input to lecturelib.train.precision: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.train import precision

CASES = [
    (lambda: precision.autocast_dtype("tpu", False), ValueError,
     r"device_type must be cpu, cuda or mps; got 'tpu'"),
    (lambda: precision.autocast_dtype("cuda", True, "fp8"), ValueError,
     r"amp must be True, False or 'auto'; got 'fp8'"),
    (lambda: precision.amp_dtype(torch.device("cpu"), "yes"), ValueError,
     r"amp must be True, False or 'auto'; got 'yes'"),
    (lambda: precision.Precision(torch.device("cpu"), 1.0), ValueError,
     r"amp must be True, False or 'auto'; got 1.0"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
