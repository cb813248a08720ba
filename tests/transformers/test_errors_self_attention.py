"""Bad input to lecturelib.transformers.self_attention: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import pytest
import torch

from lecturelib.transformers import self_attention as sa

BOOL = torch.bool
Q = torch.randn(2, 3, 4)
KV = torch.randn(2, 5, 4)
MHA = sa.MultiHeadAttention(8, 2)
X = torch.randn(2, 3, 8)
CTX = torch.randn(2, 5, 8)
SET = sa.SetAttention(6, 4, d_model=8, n_heads=2)
KEYS = torch.arange(6).repeat(2, 1)

CASES = [
    # (id, call, exception, message pattern)
    ("sdp: int q", lambda: sa.scaled_dot_product(Q.long(), KV, KV), TypeError,
     r"q must be a float tensor \(\.\.\., t, d_k\); got torch\.int64 tensor of shape \(2, 3, 4\)"),
    ("sdp: list v", lambda: sa.scaled_dot_product(Q, KV, [[0.0]]), TypeError,
     r"v must be a float tensor \(\.\.\., s, d_v\); got list \[\[0\.0\]\]"),
    ("sdp: different leading axes", lambda: sa.scaled_dot_product(Q, KV[:1], KV[:1]),
     ValueError, r"with the same leading axes; got \(2, 3, 4\), \(1, 5, 4\), \(1, 5, 4\)"),
    ("sdp: 1-D q", lambda: sa.scaled_dot_product(Q[0, 0], KV[0, 0], KV[0, 0]), ValueError,
     r"q, k, v must be \(\.\.\., t, d_k\)"),
    ("sdp: key width", lambda: sa.scaled_dot_product(Q, KV[..., :3], KV), ValueError,
     r"q and k need one d_k.*q \(2, 3, 4\), k \(2, 5, 3\)"),
    ("sdp: number of values", lambda: sa.scaled_dot_product(Q, KV, KV[:, :4]), ValueError,
     r"k and v one number of keys s.*v \(2, 4, 4\)"),
    ("sdp: zero scale", lambda: sa.scaled_dot_product(Q, KV, KV, scale=0.0), ValueError,
     r"scale must be a finite number in \(0, inf\); got float 0\.0"),
    ("sdp: nan scale", lambda: sa.scaled_dot_product(Q, KV, KV, scale=float("nan")),
     ValueError,
     r"scale must be a finite number in \(0, inf\); got float nan"),
    ("sdp: bias of other keys", lambda: sa.scaled_dot_product(Q, KV, KV,
                                                              bias=torch.zeros(3, 4)),
     ValueError, r"bias must broadcast to the scores \(\.\.\., t, s\) = \(2, 3, 5\); got "
     r"\(3, 4\)"),
    ("sdp: bias that grows the scores", lambda: sa.scaled_dot_product(
        Q, KV, KV, bias=torch.zeros(4, 2, 3, 5)), ValueError,
     r"bias must broadcast to the scores .*\(2, 3, 5\); got \(4, 2, 3, 5\)"),
    ("sdp: bool bias", lambda: sa.scaled_dot_product(Q, KV, KV,
                                                     bias=torch.ones(3, 5, dtype=BOOL)),
     TypeError,
     r"bias must be a float tensor broadcastable to the scores \(2, 3, 5\); got torch\.bool tensor of shape \(3, 5\)"),
    ("sdp: 2-D causal mask", lambda: sa.scaled_dot_product(Q, Q, Q, sa.causal_mask(3)[0]),
     ValueError, r"mask must be 3-D \(b, t, s\) = \(2, 3, 3\).*mask\[None\] for a \(t, s\)"),
    ("sdp: float mask", lambda: sa.scaled_dot_product(Q, Q, Q, sa.causal_mask(3).float()),
     TypeError, r"mask must be a bool tensor"),
    ("causal_mask: float t", lambda: sa.causal_mask(3.5), ValueError,
     r"t must be an int >= 1; got float 3\.5"),
    ("causal_mask: bool s", lambda: sa.causal_mask(2, True), ValueError,
     r"s must be an int >= 1; got bool True"),
    ("causal_mask: zero t", lambda: sa.causal_mask(0), ValueError,
     r"t must be an int >= 1; got int 0"),
    ("causal_mask: more queries than keys", lambda: sa.causal_mask(4, 2), ValueError,
     r"need 1 <= t <= s .*got t=4, s=2"),
    ("padding_mask: float lengths", lambda: sa.padding_mask(torch.tensor([2.0, 3.0])),
     TypeError,
     r"lengths must be a 1-d integer tensor \(b,\); got torch\.float32 tensor of shape \(2,\)"),
    ("padding_mask: 2-D lengths", lambda: sa.padding_mask(torch.tensor([[2]])), ValueError,
     r"lengths must be a 1-d integer tensor \(b,\); got shape \(1, 1\)"),
    ("padding_mask: list", lambda: sa.padding_mask([2, 3]), TypeError,
     r"lengths must be a 1-d integer tensor \(b,\); got list \[2, 3\]"),
    ("padding_mask: zero length", lambda: sa.padding_mask(torch.tensor([0, 3])), ValueError,
     r"lengths must be at least 1 .*got \[0, 3\]"),
    ("padding_mask: s too small", lambda: sa.padding_mask(torch.tensor([2, 4]), 3),
     ValueError,
     r"s must be an int >= 4; got int 3"),
    ("padding_mask: float s", lambda: sa.padding_mask(torch.tensor([2, 4]), 4.0), ValueError,
     r"s must be an int >= 4; got float 4\.0"),
    ("mha: zero heads", lambda: sa.MultiHeadAttention(8, 0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    ("mha: negative width", lambda: sa.MultiHeadAttention(-8, 2), ValueError,
     r"d_model must be an int >= 1; got int -8"),
    ("mha: float heads", lambda: sa.MultiHeadAttention(8, 2.0), ValueError,
     r"n_heads must be an int >= 1; got float 2\.0"),
    ("mha: not divisible", lambda: sa.MultiHeadAttention(10, 3), ValueError,
     r"d_model must be divisible by n_heads; got 10 and 3"),
    ("mha: dropout 1", lambda: sa.MultiHeadAttention(8, 2, dropout=1.0), ValueError,
     r"dropout must be a number in \[0, 1\); got float 1\.0"),
    ("mha: rotary not callable", lambda: sa.MultiHeadAttention(8, 2, rotary=4), TypeError,
     r"rotary must be callable; got int 4"),
    ("mha: width of x", lambda: MHA(torch.randn(2, 3, 4)), ValueError,
     r"x and context must be \(b, t, 8\) and \(b, s, 8\); got \(2, 3, 4\)"),
    ("mha: 2-D x", lambda: MHA(X[0]), ValueError, r"x and context must be \(b, t, 8\)"),
    ("mha: context of another batch", lambda: MHA(X, CTX[:1]), ValueError,
     r"got \(2, 3, 8\) and \(1, 5, 8\)"),
    ("mha: int x", lambda: MHA(X.long()), TypeError,
     r"x must be a float tensor \(b, t, 8\); got torch\.int64 tensor of shape \(2, 3, 8\)"),
    ("mha: int context", lambda: MHA(X, CTX.int()), TypeError,
     r"context must be a float tensor \(b, s, 8\); got torch\.int32 tensor of shape \(2, 5, 8\)"),
    ("mha: (b, s) padding mask with b == t",
     lambda: MHA(torch.randn(3, 3, 8), torch.randn(3, 5, 8),
                 mask=sa.padding_mask(torch.tensor([2, 5, 4]))[:, 0]), ValueError,
     r"mask must be 3-D \(b, t, s\) = \(3, 3, 5\).*mask\[:, None, :\]"),
    ("mha: 4-D padding mask", lambda: MHA(X, CTX, mask=torch.ones(2, 1, 1, 5, dtype=BOOL)),
     ValueError, r"mask must be \(b, t, s\) = \(2, 3, 5\).*got \(2, 1, 1, 5\)"),
    ("mha: mask of other keys", lambda: MHA(X, CTX, mask=sa.causal_mask(3)), ValueError,
     r"mask must be \(b, t, s\) = \(2, 3, 5\).*got \(1, 3, 3\)"),
    ("mha: int mask", lambda: MHA(X, mask=sa.causal_mask(3).int()), TypeError,
     r"mask must be a bool tensor \(True = may attend\); got torch.int32"),
    ("mha: bias of other keys", lambda: MHA(X, bias=torch.zeros(2, 3, 4)), ValueError,
     r"bias must broadcast to the scores \(\.\.\., t, s\) = \(2, 2, 3, 3\)"),
    ("merge_heads: other heads", lambda: MHA.merge_heads(torch.randn(2, 4, 3, 2)),
     ValueError, r"heads must be \(b, h, t, d_h\) = \(b, 2, t, 4\); got \(2, 4, 3, 2\)"),
    ("merge_heads: (b, t, d)", lambda: MHA.merge_heads(X), ValueError,
     r"heads must be \(b, h, t, d_h\) = \(b, 2, t, 4\); got \(2, 3, 8\)"),
    ("from_torch: our layer", lambda: sa.from_torch(MHA), TypeError,
     r"mha must be an nn.MultiheadAttention; got MultiHeadAttention"),
    ("from_torch: not batch_first", lambda: sa.from_torch(torch.nn.MultiheadAttention(8, 2)),
     ValueError, r"expected nn.MultiheadAttention\(\.\.\., batch_first=True\)"),
    ("order_mask: list", lambda: sa.order_mask([1, 0, 2]), TypeError,
     r"order must be an integer tensor \(t,\) of positions; got list \[1, 0, 2\]"),
    ("order_mask: repeated position", lambda: sa.order_mask(torch.tensor([0, 0, 1])),
     ValueError, r"order must be a 1-d integer permutation of 0..t-1; got torch.int64 "
     r"\[0, 0, 1\]"),
    ("order_mask: float order", lambda: sa.order_mask(torch.tensor([1.0, 0.0])), TypeError,
     r"order must be an integer tensor \(t,\) of positions; got torch\.float32 tensor of shape \(2,\)"),
    ("order_mask: empty", lambda: sa.order_mask(torch.tensor([], dtype=torch.long)),
     ValueError, r"permutation of 0..t-1; got torch.int64 \[\]"),
    ("dot_product_statistics: zero width", lambda: sa.dot_product_statistics(0, True),
     ValueError,
     r"d_k must be an int >= 1; got int 0"),
    ("dot_product_statistics: float trials",
     lambda: sa.dot_product_statistics(4, True, n=10.5), ValueError,
     r"n must be an int >= 1; got float 10\.5"),
    ("neighbour_retrieval: two items", lambda: sa.neighbour_retrieval(1, 2), ValueError,
     r"n_items must be an int >= 3; got int 2"),
    ("neighbour_retrieval: float n", lambda: sa.neighbour_retrieval(2.5, 4), ValueError,
     r"n must be an int >= 1; got float 2\.5"),
    ("SetAttention: zero values", lambda: sa.SetAttention(6, 0, 8, 2), ValueError,
     r"n_values must be an int >= 1; got int 0"),
    ("SetAttention: zero heads", lambda: sa.SetAttention(6, 4, 8, 0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    ("SetAttention: float keys", lambda: SET(KEYS.float(), KEYS % 4), TypeError,
     r"keys must be an integer \(long\) tensor of token ids; got torch\.float32 tensor of shape \(2, 6\)"),
    ("SetAttention: value out of range", lambda: SET(KEYS, KEYS), ValueError,
     r"values must hold token ids in 0\.\.3; got ids from 0 to 5"),
    ("SetAttention: shapes differ", lambda: SET(KEYS, KEYS[:, :5] % 4), ValueError,
     r"keys and values must both be \(b, t\); got \(2, 6\) and \(2, 5\)"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
