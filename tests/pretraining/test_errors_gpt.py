"""Bad input to lecturelib.pretraining.gpt: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import gpt


def model():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2))


def changed(**fields):
    """A config whose fields are changed after construction."""
    c = gpt.GPTConfig(vocab_size=7, d_model=16, n_heads=2)
    for name, value in fields.items():
        setattr(c, name, value)
    return c


CASES = [
    (lambda: gpt.evaluate_loss(model(), torch.zeros(0), 4), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32 tensor "
     r"of shape \(0,\)"),
    (lambda: gpt.evaluate_loss(model(), torch.zeros(2, 9).long(), 4), ValueError,
     r"ids must be 1-D \(t,\) token ids; got shape \(2, 9\)"),
    (lambda: gpt.evaluate_loss(model(), torch.zeros(20).long(), "4"), ValueError,
     r"seq_len must be an int >= 1; got str '4'"),
    (lambda: gpt.evaluate_loss(model(), torch.zeros(20).long(), 4, 0), ValueError,
     r"batch_size must be an int >= 1; got int 0"),
    (lambda: gpt.evaluate_loss(None, torch.zeros(20).long(), 4), TypeError,
     r"model must be a torch.nn.Module \(a language model\); got NoneType"),
    (lambda: gpt.evaluate_loss(torch.nn.ReLU(), torch.zeros(20).long(), 4), ValueError,
     r"model must have parameters; ReLU has none"),
    (lambda: gpt.n_params(torch.nn.Linear(2, 2)), TypeError,
     r"model must be a gpt.GPT; got Linear"),
    (lambda: gpt.n_params(model(), embeddings=1), TypeError,
     r"embeddings must be a bool; got int 1"),
    (lambda: gpt.GPTConfig(vocab_size=0), ValueError,
     r"GPTConfig.vocab_size must be an int >= 1; got int 0"),
    (lambda: gpt.GPTConfig(vocab_size=5, n_heads=0), ValueError,
     r"GPTConfig.n_heads must be an int >= 1; got int 0"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_model=2.5), ValueError,
     r"GPTConfig.d_model must be an int >= 1; got float 2.5"),
    (lambda: gpt.GPTConfig(vocab_size=5, seq_len=True), ValueError,
     r"GPTConfig.seq_len must be an int >= 1; got bool True"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_model=30, n_heads=4), ValueError,
     r"d_model \(30\) must be divisible by n_heads \(4\)"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_model=12, n_heads=4), ValueError,
     r"rope needs an even d_head; got d_model/n_heads = 3"),
    (lambda: gpt.GPTConfig(vocab_size=5, norm="batch"), ValueError,
     r"GPTConfig.norm must be one of \('rms', 'layer'\); got str 'batch'"),
    (lambda: gpt.GPTConfig(vocab_size=5, positions="alibi"), ValueError,
     r"GPTConfig.positions must be one of \('rope', 'learned'\); got str 'alibi'"),
    (lambda: gpt.GPTConfig(vocab_size=5, dropout=1.0), ValueError,
     r"GPTConfig.dropout must be in \[0, 1\); got 1.0"),
    (lambda: gpt.GPTConfig(vocab_size=5, d_ff=0), ValueError,
     r"GPTConfig.d_ff must be an int >= 1; got int 0"),
    (lambda: gpt.GPTConfig(vocab_size=5, rope_base=0.0), ValueError,
     r"GPTConfig.rope_base must be a finite number in \(1, inf\); got float 0.0"),
    (lambda: gpt.GPT({"vocab_size": 5}), TypeError, r"config must be a GPTConfig; got dict"),
    (lambda: model()(torch.zeros(2, 3)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32 tensor of "
     r"shape \(2, 3\)"),
    (lambda: model()(torch.zeros(3, dtype=torch.long)), ValueError,
     r"ids must be 2-D \(b, t\) token ids; got shape \(3,\)"),
    (lambda: model()([[1, 2]]), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got list"),
    (lambda: model()(torch.zeros(1, 9, dtype=torch.long)), ValueError,
     r"ids has 9 positions; the model takes 1 to seq_len = 8"),
    (lambda: model()(torch.tensor([[1, 7]])), ValueError,
     r"ids must hold token ids in 0..6; got ids from 1 to 7"),
    (lambda: model()(torch.tensor([[-1, 2]])), ValueError,
     r"ids must hold token ids in 0..6; got ids from -1 to 2"),
    (lambda: gpt.windows(torch.arange(10.0), 2, 4), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: gpt.windows(torch.zeros(2, 10, dtype=torch.long), 2, 4), ValueError,
     r"ids must be 1-D \(t,\) token ids; got shape \(2, 10\)"),
    (lambda: gpt.windows(torch.arange(10), 0, 4), ValueError,
     r"batch_size must be an int >= 1; got int 0"),
    (lambda: gpt.windows(torch.arange(10), 2, 10), ValueError,
     r"the stream \(10 tokens\) must be longer than seq_len=10"),
    (lambda: gpt.evaluate_loss(model(), torch.arange(5), 8), ValueError,
     r"the stream \(5 tokens\) is shorter than one window \+ 1"),
    (lambda: gpt.make_norm("rms"), TypeError,
     r"config must be a GPTConfig \(with norm, d_model and bias\); got str 'rms'"),
    (lambda: gpt.make_norm(changed(norm="batch")), ValueError,
     r"config.norm must be one of \('rms', 'layer'\); got str 'batch'"),
    (lambda: gpt.make_norm(changed(norm="layer", bias="yes")), TypeError,
     r"config.bias must be a bool; got str 'yes'"),
    (lambda: gpt.make_norm(changed(d_model=0)), ValueError,
     r"config.d_model must be an int >= 1; got int 0"),
    # segment_positions_and_mask
    (lambda: gpt.segment_positions_and_mask(torch.zeros(2, 4), torch.zeros(2, 4).long()),
     TypeError, r"segments must be an integer tensor \(b, t\) of example ids; got "
     r"torch.float32 tensor of shape \(2, 4\)"),
    (lambda: gpt.segment_positions_and_mask(torch.zeros(4).long(), torch.zeros(4).long()),
     ValueError, r"ids must be 2-D \(b, t\) token ids; got shape \(4,\)"),
    (lambda: gpt.segment_positions_and_mask(torch.zeros(2, 3).long(),
                                            torch.zeros(2, 4).long()),
     ValueError, r"segments must have the shape of ids \(2, 4\); got shape \(2, 3\)"),
    (lambda: gpt.segment_positions_and_mask(torch.tensor([[1, 0]]), torch.tensor([[1, 0]])),
     ValueError, r"segments must be non-decreasing along each row \(each example one run "
     r"of equal ids\)"),
    (lambda: gpt.segment_positions_and_mask(torch.zeros(1, 2).long(), [[1, 2]]), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got list"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
