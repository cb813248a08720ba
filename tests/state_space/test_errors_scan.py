"""Bad input to lecturelib.state_space.scan: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.state_space import scan


def good(b=2, t=5, d=3, n=4):
    return dict(u=torch.randn(b, t, d), delta=torch.rand(b, t, d) + 0.1,
                A=-torch.rand(d, n), B=torch.randn(b, t, n), C=torch.randn(b, t, n))


def call(fn=scan.selective_scan_ref, **changes):
    kwargs = good()
    kwargs.update(changes)
    return lambda: fn(**kwargs)


A4, X4 = torch.rand(2, 5, 3, 4), torch.randn(2, 5, 3, 4)

CASES = [
    (lambda: scan.linear_scan_chunked(A4, X4, chunk=float("inf")), ValueError,
     r"chunk must be an int >= 1; got float inf"),
    (lambda: scan.linear_scan_chunked(A4, X4, chunk=True), ValueError,
     r"chunk must be an int >= 1; got bool True"),
    (lambda: scan.linear_scan_chunked(A4, X4, chunk=0), ValueError,
     r"chunk must be an int >= 1; got int 0"),
    (lambda: scan.linear_scan_chunked(A4, X4, torch.zeros(1, 3, 4)), ValueError,
     r"mismatched state sizes: h0 must be \(b, d, n\) = \(2, 3, 4\); got torch.float32 "
     r"tensor of shape \(1, 3, 4\)"),
    (lambda: scan.linear_scan_loop(A4, X4, torch.zeros(3, 3, 4)), ValueError,
     r"h0 must be \(b, d, n\) = \(2, 3, 4\)"),
    (call(delta=torch.zeros(2, 5, 3)), ValueError,
     r"delta \(Δ\) must be > 0 and finite everywhere \(an infinite step makes the "
     r"states NaN\); got a minimum of 0"),
    (call(scan.selective_scan, delta=-torch.rand(2, 5, 3)), ValueError,
     r"delta \(Δ\) must be > 0 and finite everywhere .*; got a minimum of -"),
    (call(scan.selective_scan, delta=torch.full((2, 5, 3), float("inf"))), ValueError,
     r"delta \(Δ\) must be > 0 and finite everywhere .*; got a minimum of inf and a "
     r"maximum of inf"),
    (call(delta=torch.tensor([[[1.0, float("inf"), 1.0]] * 5] * 2)), ValueError,
     r"delta \(Δ\) must be > 0 and finite everywhere .*maximum of inf"),
    (call(delta=torch.full((2, 5, 3), float("nan"))), ValueError,
     r"delta \(Δ\) must be > 0 and finite everywhere"),
    (call(B=torch.randn(2, 5, 6)), ValueError,
     r"mismatched state sizes: B must be \(b, t, n\) = \(2, 5, 4\) \(n from A\); "
     r"got \(2, 5, 6\)"),
    (call(scan.selective_scan, C=torch.randn(2, 5, 3)), ValueError,
     r"mismatched state sizes: C must be \(b, t, n\) = \(2, 5, 4\)"),
    (call(h0=torch.zeros(2, 3, 5)), ValueError,
     r"mismatched state sizes: h0 must be \(b, d, n\) = \(2, 3, 4\); got torch.float32 "
     r"tensor of shape \(2, 3, 5\)"),
    (call(A=-torch.rand(4, 4)), ValueError,
     r"A must have one row per channel, \(3, n\); got \(4, 4\)"),
    (call(u=torch.randn(5, 3)), ValueError, r"u must be \(b, t, d\); got shape \(5, 3\)"),
    (call(u=torch.ones(2, 5, 3, dtype=torch.long)), TypeError,
     r"u must be a float tensor \(b, t, d\); got torch.int64"),
    (call(delta=torch.rand(2, 4, 3) + 0.1), ValueError,
     r"delta must have u's shape \(2, 5, 3\); got \(2, 4, 3\)"),
    (call(D=torch.ones(4)), ValueError, r"D must be a \(3,\) tensor or None"),
    (call(z=torch.ones(2, 5, 4)), ValueError, r"z must have u's shape \(2, 5, 3\) or be None"),
    (call(scan.selective_scan, method="blelloch"), ValueError,
     r"method must be one of \('loop', 'parallel', 'chunked'\); got 'blelloch'"),
    (lambda: scan.linear_scan_chunked(torch.rand(1, 4, 2, 2), torch.rand(1, 4, 2, 2),
                                      chunk=0), ValueError, r"chunk must be an int >= 1"),
    (lambda: scan.linear_scan_parallel(torch.rand(1, 4, 2, 2), torch.rand(1, 5, 2, 2)),
     ValueError, r"a and x must have the same shape; got \(1, 4, 2, 2\) and \(1, 5, 2, 2\)"),
    (lambda: scan.linear_scan_loop(torch.rand(4, 2, 2), torch.rand(4, 2, 2)), ValueError,
     r"a must be \(b, t, d, n\); got shape \(4, 2, 2\)"),
    (call(h0=[0.0]), TypeError, r"h0 must be a \(b, d, n\) tensor or None; got list"),
    (lambda: scan.triton_scan(interpret="yes"), TypeError,
     r"interpret must be a bool or None; got 'yes'"),
    (lambda: scan.ssd(torch.randn(2, 5, 3), torch.full((2, 5), 1.5),
                      torch.randn(2, 5, 4), torch.randn(2, 5, 4)), ValueError,
     r"a must be in \(0, 1\] everywhere \(a decay per step\); got a minimum of 1.5"),
    (lambda: scan.ssd_matrix(torch.zeros(2, 5), torch.randn(2, 5, 4),
                             torch.randn(2, 5, 4)), ValueError,
     r"a must be in \(0, 1\] everywhere .*; got a minimum of 0 and a maximum of 0"),
    (lambda: scan.ssd_matrix(torch.rand(2, 5), torch.randn(2, 6, 4),
                             torch.randn(2, 6, 4)), ValueError,
     r"mismatched lengths: B and C must be \(b, l, n\) with \(b, l\) = \(2, 5\) from "
     r"a; got \(2, 6, 4\) and \(2, 6, 4\)"),
    (lambda: scan.ssd(torch.randn(2, 4, 3), torch.rand(2, 5), torch.randn(2, 5, 4),
                      torch.randn(2, 5, 4)), ValueError,
     r"mismatched lengths: x must be \(b, l, d\) with \(b, l\) = \(2, 5\) from a; "
     r"got \(2, 4, 3\)"),
    # segsum
    (lambda: scan.segsum([0.0, 1.0]), TypeError,
     r"log_a must be a float tensor \(\.\.\., l\); got list"),
    (lambda: scan.segsum(torch.tensor(0.0)), ValueError,
     r"log_a must be \(\.\.\., l\) with at least one axis; got shape \(\)"),
    (lambda: scan.segsum(torch.zeros(2, 3).long()), TypeError,
     r"log_a must be a float tensor \(\.\.\., l\); got torch.int64 tensor of shape \(2, 3\)"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
