"""Bad input to lecturelib.pretraining.interpret: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import gpt, interpret


def model():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2))


CASES = [
    (lambda: interpret.logit_lens(torch.nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long)),
     TypeError, r"model must be a gpt.GPT; got Linear"),
    (lambda: interpret.logit_lens(model(), torch.zeros(1, 9, dtype=torch.long)), ValueError,
     r"ids has 9 positions; the model takes 1 to seq_len = 8"),
    (lambda: interpret.logit_lens(model(), torch.zeros(2, 3)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: interpret.lens_loss_rank(model(), torch.zeros(2, 1, dtype=torch.long)),
     ValueError, r"ids needs at least 2 positions \(a next token\); got shape \(2, 1\)"),
    (lambda: interpret.lens_loss_rank("gpt", torch.zeros(2, 3, dtype=torch.long)),
     TypeError, r"model must be a gpt.GPT; got str"),
    (lambda: interpret.attention(model().blocks[0], torch.randn(1, 3, 16)), TypeError,
     r"attn must be a gpt.CausalSelfAttention; got Block"),
    (lambda: interpret.attention(model().blocks[0].attn, torch.randn(1, 3, 12)), ValueError,
     r"x must be a \(b, t, 16\) tensor; got torch.float32 tensor of shape \(1, 3, 12\)"),
    (lambda: interpret.attention(model().blocks[0].attn, torch.randn(3, 16)), ValueError,
     r"x must be a \(b, t, 16\) tensor; got .*shape \(3, 16\)"),
    (lambda: interpret.attention_maps(model(), torch.tensor([[7]])), ValueError,
     r"ids must hold token ids in 0..6; got ids from 7 to 7"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
