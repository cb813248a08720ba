"""Bad input to lecturelib.efficiency.linear_attention: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import linear_attention as la

Q = torch.zeros(1, 8, 4)
K = torch.zeros(1, 6, 4)
V = torch.zeros(1, 6, 4)

CASES = [
    (
        lambda: la.linear_attention(Q, K, V, causal=True),
        ValueError,
        r"causal linear attention needs t = s; got t=8, s=6",
    ),
    (
        lambda: la.linear_attention(Q, K, V, feature=3),
        TypeError,
        r"feature must be callable; got int 3",
    ),
    (
        lambda: la.linear_attention(Q, K[..., :2], V),
        ValueError,
        r"q, k, v must be \(\.\.\., t, d\), \(\.\.\., s, d\), \(\.\.\., s, d_v\)",
    ),
    (
        lambda: la.linear_attention_recurrent(Q, K, V),
        ValueError,
        r"causal linear attention needs t = s; got t=8, s=6",
    ),
    (lambda: la.random_features(4, 0), ValueError, r"m must be an int >= 1; got int 0"),
    (
        lambda: la.performer_features(Q, torch.zeros(3, 5)),
        ValueError,
        r"w must be \(m, d\) with d = 4; got torch.float32 tensor of shape \(3, 5\)",
    ),
    (
        lambda: la.performer_features([1.0], torch.zeros(3, 1)),
        TypeError,
        r"x must be a float tensor \(\.\.\., d\); got list",
    ),
    (
        lambda: la.linformer_attention(Q, K, V, torch.zeros(2, 5)),
        ValueError,
        r"e must be an \(r, s\) projection with s = 6; got torch.float32 tensor of shape "
        r"\(2, 5\)",
    ),
    (
        lambda: la.linformer_attention(Q, K, V, torch.zeros(2, 6), torch.zeros(6)),
        ValueError,
        r"f must be an \(r, s\) projection with s = 6",
    ),
    (
        lambda: la.sliding_window_mask(8, 0),
        ValueError,
        r"window must be an int >= 1; got int 0",
    ),
    (
        lambda: la.bigbird_mask(8, 2, 9, 1),
        ValueError,
        r"n_global and n_random must be <= t = 8; got 9, 1",
    ),
    (
        lambda: la.bigbird_mask(8, 2, -1, 1),
        ValueError,
        r"n_global must be an int >= 0; got int -1",
    ),
    (
        lambda: la.RecallModel("flash", 8, 16, 4),
        ValueError,
        r"variant must be one of \('softmax', .*\); got str 'flash'",
    ),
    (
        lambda: la.RecallModel("linear", 8, 16, 0),
        ValueError,
        r"n_values must be an int >= 1; got int 0",
    ),
    (
        lambda: la.RecallModel("linear", 8, 16, 4)(
            torch.zeros(2, 7, 2, dtype=torch.long), torch.zeros(2, dtype=torch.long)
        ),
        ValueError,
        r"items must be \(b, 8, 2\) integer ids; got torch.int64 tensor of shape "
        r"\(2, 7, 2\)",
    ),
    (
        lambda: la.recall_batch(4, 8, 6, 4),
        ValueError,
        r"n_keys must be an int >= 8; got int 6",
    ),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
