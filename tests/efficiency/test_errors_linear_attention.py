"""Bad input to lecturelib.efficiency.linear_attention: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import linear_attention as la

Q = torch.zeros(1, 8, 4)
K = torch.zeros(1, 6, 4)
V = torch.zeros(1, 6, 4)

def recall():
    torch.manual_seed(0)
    return la.RecallModel("softmax", 3, 4, 5, d_model=8)


ITEMS, QUERY, _ = la.recall_batch(2, 3, 4, 5)  # 3 items, 4 keys, 5 values


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
    (
        lambda: la.linear_attention(Q, K, V, causal="no"),
        TypeError,
        r"causal must be a bool; got str 'no'",
    ),
    (
        lambda: la.linear_attention(Q, K[:, :0], V[:, :0]),
        ValueError,
        r"linear attention needs at least one key \(with none its normaliser "
        r"φ\(q\)·Σφ\(k\) is 0\); got k of shape \(1, 0, 4\)",
    ),
    (
        lambda: la.linear_attention_recurrent(Q[:, :0], K[:, :0], V[:, :0]),
        ValueError,
        r"linear attention needs at least one key",
    ),
    (
        lambda: la.elu_feature(torch.arange(3)),
        TypeError,
        r"x must be a float tensor \(\.\.\., d\); got torch.int64",
    ),
    (
        lambda: la.random_features(4, 2, seed=1.5),
        ValueError,
        r"seed must be an int >= 0; got float 1.5",
    ),
    (
        lambda: la.performer_features(torch.zeros(3, 4), torch.zeros(0, 4)),
        ValueError,
        r"w must hold m >= 1 random features; got torch.float32 tensor of shape "
        r"\(0, 4\)",
    ),
    (
        lambda: la.performer_features(torch.zeros(3, 0), torch.zeros(2, 0)),
        ValueError,
        r"x must be \(\.\.\., d\) with d >= 1; got torch.float32 tensor of shape "
        r"\(3, 0\)",
    ),
    (
        lambda: la.linformer_attention(Q, K, V, torch.ones(2, 6, dtype=torch.long)),
        TypeError,
        r"e must be a float tensor \(r, s\) with s = 6; got torch.int64",
    ),
    (
        lambda: la.linformer_attention(Q, K, V, torch.ones(0, 6)),
        ValueError,
        r"e must project to r >= 1 rows; got torch.float32 tensor of shape \(0, 6\)",
    ),
    (
        lambda: la.sliding_window_mask(4, 2, causal="no"),
        TypeError,
        r"causal must be a bool; got str 'no'",
    ),
    (
        lambda: la.bigbird_mask(8, 2, 1, 1, seed=0.5),
        ValueError,
        r"seed must be an int >= 0; got float 0.5",
    ),
    (
        lambda: la.recall_batch(2, 3, 4, 5, seed="s"),
        ValueError,
        r"seed must be an int >= 0; got str 's'",
    ),
    (
        lambda: la.RecallModel("performer", 3, 4, 5, d_model=8, seed=0.5),
        ValueError,
        r"seed must be an int >= 0; got float 0.5",
    ),
    (
        lambda: recall()(ITEMS, QUERY + 4),
        ValueError,
        r"query must hold token ids in 0..3; got ids from",
    ),
    (
        lambda: recall()(ITEMS, QUERY[:, None]),
        ValueError,
        r"query must be \(b,\) = \(2,\) key ids, one per row of items; got shape "
        r"\(2, 1\)",
    ),
    (
        lambda: recall()(ITEMS, QUERY[:1]),
        ValueError,
        r"query must be \(b,\) = \(2,\) key ids, one per row of items; got shape "
        r"\(1,\)",
    ),
    (
        lambda: recall()(ITEMS, QUERY.float()),
        TypeError,
        r"query must be an integer \(long\) tensor of token ids; got torch.float32",
    ),
    (
        lambda: recall()(ITEMS + torch.tensor([4, 0]), QUERY),
        ValueError,
        r"items' keys must hold token ids in 0..3; got ids from",
    ),
    (
        lambda: recall()(ITEMS + torch.tensor([0, 5]), QUERY),
        ValueError,
        r"items' values must hold token ids in 0..4; got ids from",
    ),
    # performer_attention
    (
        lambda: la.performer_attention(Q, K, V, [1.0]),
        TypeError,
        r"w must be a float tensor \(m, d\) with d = 4; got list",
    ),
    (
        lambda: la.performer_attention(Q, K, V, torch.randn(6, 3)),
        ValueError,
        r"w must be \(m, d\) with d = 4; got torch.float32 tensor of shape \(6, 3\)",
    ),
    (
        lambda: la.performer_attention(Q, K, V, torch.randn(0, 4)),
        ValueError,
        r"w must hold m >= 1 random features; got torch.float32 tensor of shape \(0, 4\)",
    ),
    (
        lambda: la.performer_attention(Q, K, V, la.random_features(4, 6), causal="yes"),
        TypeError,
        r"causal must be a bool; got str 'yes'",
    ),
    (
        lambda: la.performer_attention(Q, K, V, la.random_features(4, 6), causal=True),
        ValueError,
        r"causal linear attention needs t = s; got t=8, s=6",
    ),
    (
        lambda: la.performer_attention(Q[..., :0], K[..., :0], V, torch.randn(6, 0)),
        ValueError,
        r"q and k must have d >= 1 features \(the scale is d\^\(-1/4\)\); got q of shape "
        r"\(1, 8, 0\)",
    ),
    (
        lambda: la.performer_attention(Q[..., :2], K, V, la.random_features(4, 6)),
        ValueError,
        r"q, k, v must be \(\.\.\., t, d\), \(\.\.\., s, d\), \(\.\.\., s, d_v\)",
    ),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
