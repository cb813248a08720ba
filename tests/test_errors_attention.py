"""Bad input to lecturelib.attention: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import pytest
import torch

from lecturelib import attention

Q, K, V = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
SCORES = torch.zeros(2, 3, 5)
KEEP = torch.ones(2, 1, 5, dtype=torch.bool)

CASES = [
    # (id, call, exception, message pattern)
    ("dot: 2-D queries", lambda: attention.DotScore()(Q[0], K), ValueError,
     r"queries must be \(b, t, d_q\).*got \(3, 4\)"),
    ("dot: widths differ", lambda: attention.DotScore()(Q, K[..., :3]), ValueError,
     r"needs d_q == d_k; got queries \(2, 3, 4\) and keys \(2, 5, 3\)"),
    ("bilinear: key width", lambda: attention.BilinearScore(4, 4)(Q, K[..., :3]),
     ValueError, r"expected d_q=4, d_k=4; got .*\(2, 5, 3\)"),
    ("make_score: unknown", lambda: attention.make_score("cosine", 4, 4), ValueError,
     r"score must be one of .*got 'cosine'"),
    ("make_score: dot widths", lambda: attention.make_score("dot", 4, 8), ValueError,
     r"d_q == d_k; got 4 and 8"),
    ("attend: scores vs values", lambda: attention.attend(torch.zeros(2, 3, 4), V),
     ValueError, r"scores must be \(b, t, s\) and values \(b, s, d_v\); got \(2, 3, 4\)"),
    ("attend: 2-D padding mask",
     lambda: attention.attend(SCORES, V, torch.ones(2, 5, dtype=torch.bool)), ValueError,
     r"mask must be 3-D \(b, t, s\) = \(2, 3, 5\).*got the 2-D \(2, 5\).*mask\[:, None, :\]"),
    ("attend: mask of other keys",
     lambda: attention.attend(SCORES, V, torch.ones(2, 1, 4, dtype=torch.bool)), ValueError,
     r"mask must be \(b, t, s\) = \(2, 3, 5\).*got \(2, 1, 4\)"),
    ("masked_softmax: float mask",
     lambda: attention.masked_softmax(SCORES, torch.ones(2, 1, 5)), TypeError,
     r"mask must be a bool tensor.*got torch.float32"),
    ("masked_softmax: all masked",
     lambda: attention.masked_softmax(SCORES, torch.zeros(2, 1, 5, dtype=torch.bool)),
     ValueError, r"mask: every query needs at least one key"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
