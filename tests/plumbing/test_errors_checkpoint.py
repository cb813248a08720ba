"""Bad input to lecturelib.train.checkpoint: the error and its message."""

from __future__ import annotations

import pytest

from lecturelib.train import checkpoint

CASES = [
    (lambda: checkpoint.load("/nonexistent/c.pt"), checkpoint.CheckpointError,
     r"no checkpoint file at /nonexistent/c.pt"),
    (lambda: checkpoint.load("/"), ValueError, r"checkpoint must be a file path; / is a directory"),
    (lambda: checkpoint.save(None, {}), TypeError,
     r"checkpoint must be a file path \(str or Path\); got NoneType"),
    (lambda: checkpoint.save("/", {}), ValueError, r"/ is a directory"),
    (lambda: checkpoint.exclusive(None).__enter__(), TypeError,
     r"checkpoint must be a file path \(str or Path\); got NoneType"),
    (lambda: checkpoint.check_path("/etc/hostname/c.pt"), ValueError,
     r"checkpoint folder /etc/hostname exists and is not a directory"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
