"""Bad input to lecturelib.efficiency.flash_triton: the error and its message.

Only the checks that run before any kernel is defined (the module imports without
Triton; the kernel itself is tested in a fresh process by tests/efficiency/test_flash_triton.py)."""

from __future__ import annotations

import pytest

from lecturelib.efficiency import flash_triton

CASES = [
    (lambda: flash_triton.triton_kernel(1), TypeError,
     r"interpret must be a bool or None; got 1"),
    (lambda: flash_triton.triton_kernel("yes"), TypeError,
     r"interpret must be a bool or None; got 'yes'"),
    (lambda: flash_triton.tflops(64, 16, 1, 1, "no", 1.0), TypeError,
     r"causal must be a bool; got str 'no'"),
    (lambda: flash_triton.tflops(64, 16, 1, 1, None, 1.0), TypeError,
     r"causal must be a bool; got NoneType None"),
    (lambda: flash_triton.tflops(0, 16, 1, 1, False, 1.0), ValueError,
     r"t must be an int >= 1; got int 0"),
    (lambda: flash_triton.tflops(64, 16, 0, 1, False, 1.0), ValueError,
     r"heads must be an int >= 1; got int 0"),
    (lambda: flash_triton.tflops(64, 16, 1, 2.0, False, 1.0), ValueError,
     r"batch must be an int >= 1; got float 2.0"),
    (lambda: flash_triton.tflops(64, 16, 1, 1, False, 0.0), ValueError,
     r"seconds must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: flash_triton.tflops(64, 16, 1, 1, False, float("nan")), ValueError,
     r"seconds must be a finite number in \(0, inf\); got float nan"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
