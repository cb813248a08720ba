"""Bad input to lecturelib.pretraining.gpt: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import gpt


def model():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2))


CASES = [
    (lambda: gpt.GPTConfig(vocab_size=0), ValueError,
     r"GPTConfig.vocab_size must be a positive int; got 0"),
    (lambda: gpt.GPTConfig(vocab_size=5, n_heads=0), ValueError,
     r"GPTConfig.n_heads must be a positive int; got 0"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_model=2.5), ValueError,
     r"GPTConfig.d_model must be a positive int; got 2.5"),
    (lambda: gpt.GPTConfig(vocab_size=5, seq_len=True), ValueError,
     r"GPTConfig.seq_len must be a positive int; got True"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_model=30, n_heads=4), ValueError,
     r"d_model \(30\) must be divisible by n_heads \(4\)"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_model=12, n_heads=4), ValueError,
     r"rope needs an even d_head; got d_model/n_heads = 3"),
    (lambda: gpt.GPTConfig(vocab_size=5, norm="batch"), ValueError,
     r"GPTConfig.norm must be one of \('rms', 'layer'\); got 'batch'"),
    (lambda: gpt.GPTConfig(vocab_size=5, positions="alibi"), ValueError,
     r"GPTConfig.positions must be one of \('rope', 'learned'\); got 'alibi'"),
    (lambda: gpt.GPTConfig(vocab_size=5, dropout=1.0), ValueError,
     r"GPTConfig.dropout must be in \[0, 1\); got 1.0"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_ff=0), ValueError,
     r"GPTConfig.d_ff must be a positive int or None; got 0"),
    (lambda: gpt.GPTConfig(vocab_size=5, rope_base=0.0), ValueError,
     r"GPTConfig.rope_base must be > 1; got 0.0"),
    (lambda: gpt.GPT({"vocab_size": 5}), TypeError, r"config must be a GPTConfig; got dict"),
    (lambda: model()(torch.zeros(2, 3)), ValueError,
     r"ids must be a \(b, t\) integer tensor of token ids; got torch.float32 tensor of shape "
     r"\(2, 3\)"),
    (lambda: model()(torch.zeros(3, dtype=torch.long)), ValueError,
     r"ids must be a \(b, t\) integer tensor .*shape \(3,\)"),
    (lambda: model()([[1, 2]]), ValueError, r"ids must be a \(b, t\) integer tensor .*got list"),
    (lambda: model()(torch.zeros(1, 9, dtype=torch.long)), ValueError,
     r"ids has 9 positions; the model takes 1 to seq_len = 8"),
    (lambda: model()(torch.tensor([[1, 7]])), ValueError,
     r"ids must lie in 0..6; got values from 1 to 7"),
    (lambda: model()(torch.tensor([[-1, 2]])), ValueError,
     r"ids must lie in 0..6; got values from -1 to 2"),
    (lambda: gpt.windows(torch.arange(10.0), 2, 4), ValueError,
     r"ids must be a 1-d integer token stream"),
    (lambda: gpt.windows(torch.arange(10), 0, 4), ValueError,
     r"batch_size must be a positive int; got 0"),
    (lambda: gpt.windows(torch.arange(10), 2, 10), ValueError,
     r"the stream \(10 tokens\) must be longer than seq_len=10"),
    (lambda: gpt.evaluate_loss(model(), torch.arange(5), 8), ValueError,
     r"the stream \(5 tokens\) is shorter than one window \+ 1"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
