"""Bad input to lecturelib.efficiency.mtp: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import mtp
from lecturelib.pretraining import gpt


def model():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1,
                                 n_heads=2))


def heads():
    return mtp.MTPHeads(model(), 3)


X = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(0))
Y = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(1))


CASES = [
    (lambda: mtp.MTPHeads("gpt", 3), TypeError, r"model must be a gpt.GPT; got str"),
    (lambda: mtp.MTPHeads(model(), 1), ValueError,
     r"n_future must be an int >= 2; got int 1"),
    (lambda: mtp.self_speculative_generate(model(), torch.tensor([[1]]), 3), TypeError,
     r"heads must be an MTPHeads; got GPT"),
    (lambda: mtp.self_speculative_generate(mtp.MTPHeads(model(), 2),
                                           torch.tensor([[1, 2]]), 7), ValueError,
     r"prompt \(2\) \+ n_new \(7\) must fit in the trunk's seq_len = 8"),
    (lambda: mtp.self_speculative_generate(mtp.MTPHeads(model(), 2),
                                           torch.tensor([1, 2]), 3), ValueError,
     r"prompt must be a \(1, t\) tensor of token ids; got torch.int64 tensor of shape "
     r"\(2,\)"),
    (lambda: mtp.greedy_generate(model(), torch.tensor([[1]]), 0), ValueError,
     r"n_new must be an int >= 1; got int 0"),
    (lambda: mtp.greedy_generate(None, torch.tensor([[1]]), 2), TypeError,
     r"model must be a gpt.GPT; got NoneType"),
    (lambda: mtp.head_accuracy(mtp.MTPHeads(model(), 2), torch.arange(5), 8),
     ValueError, r"ids must hold more than seq_len = 8 tokens"),
    (lambda: mtp.head_accuracy(mtp.MTPHeads(model(), 4), torch.arange(20) % 7, 2),
     ValueError, r"seq_len must be an int in 4..8; got int 2"),
    (lambda: mtp.head_accuracy(mtp.MTPHeads(model(), 2), torch.arange(20) % 7, 9),
     ValueError, r"seq_len must be an int in 2..8; got int 9"),
    (lambda: mtp.head_accuracy(mtp.MTPHeads(model(), 2), torch.arange(20.0), 4),
     TypeError, r"ids must be an integer \(long\) tensor of token ids; got "
     r"torch.float32 tensor of shape \(20,\)"),
    (lambda: mtp.head_accuracy(mtp.MTPHeads(model(), 2), torch.arange(20), 4),
     ValueError, r"ids must hold token ids in 0..6; got ids from 0 to 19"),
    (lambda: mtp.head_accuracy(mtp.MTPHeads(model(), 2), torch.zeros(2, 9).long(), 4),
     ValueError, r"ids must be 1-D \(t,\) token ids; got shape \(2, 9\)"),
    (lambda: mtp.head_accuracy(model(), torch.zeros(9).long(), 4),
     TypeError, r"heads must be an MTPHeads; got GPT"),
    (lambda: mtp.mtp_loss(heads(), (X[:, :2], Y[:, :2])), ValueError,
     r"x must hold at least n_future = 3 positions \(head k is scored on t - k \+ 1 of "
     r"them\); got t = 2"),
    (lambda: mtp.mtp_loss(heads(), (X, torch.full((2, 5), -100))), ValueError,
     r"y must hold token ids in 0..6; got ids from -100 to -100"),
    (lambda: mtp.mtp_loss(heads(), (X, torch.full((2, 5), 9))), ValueError,
     r"y must hold token ids in 0..6; got ids from 9 to 9"),
    (lambda: mtp.mtp_loss(heads(), (X, Y[:, :3])), ValueError,
     r"y must have the shape of x \(2, 5\); got \(2, 3\)"),
    (lambda: mtp.mtp_loss(heads(), (X, Y.float())), TypeError,
     r"y must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: mtp.mtp_loss(heads(), X), TypeError,
     r"batch must be a pair \(x, y\) of \(b, t\) ids; got torch.int64 tensor"),
    (lambda: mtp.mtp_loss(model(), (X, Y)), TypeError,
     r"heads must be an MTPHeads; got GPT"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
