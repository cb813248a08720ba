"""Bad input to lecturelib.train.progress: the error and its message."""

from __future__ import annotations

import pytest

from lecturelib.train import progress

CASES = [
    (lambda: progress.progress_bar(range(3), 3, 0, "x", True), ValueError,
     r"\$LECTURELIB_PROGRESS must be bar, summary or off; got 'loud'"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message, monkeypatch):
    monkeypatch.setenv("LECTURELIB_PROGRESS", "loud")
    with pytest.raises(error, match=message):
        call()
