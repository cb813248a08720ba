"""Bad input to lecturelib.records: the error and its message."""

from __future__ import annotations

import pytest

from lecturelib import records

CASES = [
    (lambda: records.load("../secrets"), ValueError,
     r"name must be a record's file name without .json; got '../secrets'"),
    (lambda: records.load(3), ValueError, r"name must be a record's file name .*; got 3"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
