"""Bad input to lecturelib.transformers.positional_lm: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lecturelib.transformers import positional_lm as plm
from lecturelib.transformers import self_attention as sa

X = torch.randn(2, 5, 8)
LM = plm.PositionalLM(plm.PositionalLMConfig(vocab_size=7, scheme="alibi", d_model=8,
                                             n_heads=2, n_layers=1, max_len=8))
BLOCK = plm.PreLNBlock(8, sa.MultiHeadAttention(8, 2))


def config(**kw):
    return plm.PositionalLMConfig(**{"vocab_size": 7, "scheme": "rope"} | kw)


CASES = [
    # (id, call, exception, message pattern)
    ("PreLNBlock: zero width", lambda: plm.PreLNBlock(0, sa.MultiHeadAttention(8, 2)),
     ValueError,
     r"d_model must be an int >= 1; got int 0"),
    ("PreLNBlock: attention not a module", lambda: plm.PreLNBlock(8, "mha"), TypeError,
     r"attn must be an attention nn.Module .*got str"),
    ("PreLNBlock: dropout 1.5", lambda: plm.PreLNBlock(8, sa.MultiHeadAttention(8, 2),
                                                       dropout=1.5), ValueError,
     r"dropout must be a number in \[0, 1\); got float 1\.5"),
    ("PreLNBlock: other width", lambda: BLOCK(X[..., :6]), ValueError,
     r"x must be \(b, t, d_model\) = \(b, t, 8\); got \(2, 5, 6\)"),
    ("PreLNBlock: 2-D mask", lambda: BLOCK(X, sa.causal_mask(5)[0]), ValueError,
     r"mask must be 3-D"),
    ("config: unknown scheme", lambda: config(scheme="absolute"), ValueError,
     r"scheme must be one of \('none', 'sinusoidal', 'learned', 'shaw', 'alibi', 'rope'\); got str 'absolute'"),
    ("config: zero heads", lambda: config(n_heads=0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    ("config: negative layers", lambda: config(n_layers=-1), ValueError,
     r"n_layers must be an int >= 1; got int -1"),
    ("config: float vocabulary", lambda: config(vocab_size=7.0), ValueError,
     r"vocab_size must be an int >= 1; got float 7\.0"),
    ("config: not divisible", lambda: config(d_model=10, n_heads=4), ValueError,
     r"d_model must be divisible by n_heads; got d_model=10, n_heads=4"),
    ("config: odd RoPE heads", lambda: config(d_model=12, n_heads=4), ValueError,
     r"d_head = d_model / n_heads must be a positive even int .*got 3"),
    ("config: negative dropout", lambda: config(dropout=-0.1), ValueError,
     r"dropout must be a number in \[0, 1\); got float -0\.1"),
    ("config: positional", lambda: plm.PositionalLMConfig(7, "rope"), TypeError,
     r"positional"),
    ("PositionalLM: sizes, not a config", lambda: plm.PositionalLM(7, "rope"), TypeError,
     r"config must be a PositionalLMConfig; got int"),
    ("PositionalLM: block not callable", lambda: plm.PositionalLM(config(), block=3),
     TypeError,
     r"block must be callable; got int 3"),
    ("PositionalLM: float ids", lambda: LM(torch.zeros(2, 4)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch\.float32 tensor of shape \(2, 4\)"),
    ("PositionalLM: 1-D ids", lambda: LM(torch.zeros(4, dtype=torch.long)), ValueError,
     r"ids must be 2-D \(b, t\) token ids; got shape \(4,\)"),
    ("PositionalLM: ids past the vocabulary", lambda: LM(torch.full((1, 4), 7)), ValueError,
     r"ids must hold token ids in 0\.\.6; got ids from 7 to 7"),
    ("loss_by_position: float ids", lambda: plm.loss_by_position(LM, torch.zeros(20), 4),
     TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch\.float32 tensor of shape \(20,\)"),
    ("loss_by_position: 2-D ids",
     lambda: plm.loss_by_position(LM, torch.zeros(2, 20, dtype=torch.long), 4), ValueError,
     r"ids must be 1-D \(t,\) token ids; got shape \(2, 20\)"),
    ("loss_by_position: zero length",
     lambda: plm.loss_by_position(LM, torch.zeros(20, dtype=torch.long), 0), ValueError,
     r"length must be an int >= 1; got int 0"),
    ("loss_by_position: zero batch",
     lambda: plm.loss_by_position(LM, torch.zeros(20, dtype=torch.long), 4, batch_size=0),
     ValueError,
     r"batch_size must be an int >= 1; got int 0"),
    ("loss_by_position: zero windows",
     lambda: plm.loss_by_position(LM, torch.zeros(20, dtype=torch.long), 4, max_windows=0),
     ValueError,
     r"max_windows must be an int >= 1; got int 0"),
    ("loss_by_position: stream too short",
     lambda: plm.loss_by_position(LM, torch.zeros(4, dtype=torch.long), 4), ValueError,
     r"the stream \(4 tokens\) is shorter than one window of 5"),
    ("loss_by_position: not a model",
     lambda: plm.loss_by_position(lambda ids: ids, torch.zeros(20, dtype=torch.long), 4),
     TypeError, r"model must be an nn.Module with parameters; got function"),
    ("loss_by_position: a model without parameters",
     lambda: plm.loss_by_position(nn.Identity(), torch.zeros(20, dtype=torch.long), 4),
     TypeError, r"model must be an nn.Module with parameters; got Identity"),
    ("t5_bucket: float offsets", lambda: plm.t5_bucket(torch.zeros(3)), TypeError,
     r"relative must be an integer tensor of offsets j - i; got torch\.float32 tensor"),
    ("t5_bucket: offsets not a tensor", lambda: plm.t5_bucket([0, 1, 2]), TypeError,
     r"relative must be an integer tensor of offsets j - i; got list"),
    ("t5_bucket: bidirectional 1",
     lambda: plm.t5_bucket(torch.arange(3), bidirectional=1), TypeError,
     r"bidirectional must be a bool; got int 1"),
    ("t5_bucket: too few buckets",
     lambda: plm.t5_bucket(torch.arange(3), True, n_buckets=3), ValueError,
     r"n_buckets must be >= 4 with bidirectional, .*got n_buckets=3, max_distance=128"),
    ("t5_bucket: max_distance within the exact ones",
     lambda: plm.t5_bucket(torch.arange(3), False, n_buckets=8, max_distance=4),
     ValueError,
     r"max_distance above its 4 exact distances; got n_buckets=8, max_distance=4"),
    ("t5_bucket: zero buckets", lambda: plm.t5_bucket(torch.arange(3), n_buckets=0),
     ValueError, r"n_buckets must be an int >= 1; got int 0"),
    ("T5Bias: zero heads", lambda: plm.T5Bias(0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    ("T5Bias: float max_distance", lambda: plm.T5Bias(2, 8, 16.0), ValueError,
     r"max_distance must be an int >= 1; got float 16\.0"),
    ("T5Bias: zero queries", lambda: plm.T5Bias(2)(0), ValueError,
     r"t must be an int >= 1; got int 0"),
    ("T5Bias: keys as a float", lambda: plm.T5Bias(2)(4, 8.0), ValueError,
     r"s must be an int >= 1; got float 8\.0"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
