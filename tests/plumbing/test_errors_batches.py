"""Bad input to lecturelib.train.batches: the error and its message."""

from __future__ import annotations

import pytest

from lecturelib.train import batches

CASES = [
    (lambda: batches.BatchSource(42), TypeError,
     r"batches must be a function step -> batch, a list of batches or an iterable .*got int"),
    (lambda: batches.BatchSource([]), ValueError, r"batches is an empty list"),
    (lambda: batches.BatchSource(iter([]))(0), ValueError, r"batches yielded nothing"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
