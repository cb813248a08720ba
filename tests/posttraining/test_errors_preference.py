"""Bad input to lecturelib.posttraining.preference: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import preference
from lecturelib.pretraining import gpt


def model():
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2)
    )


X, Y = torch.zeros(3), torch.ones(3)
E = torch.zeros(0)
IDS = torch.zeros(2, 5, dtype=torch.long)

CASES = [
    (
        lambda: preference.bradley_terry_loss([1.0], Y),
        TypeError,
        r"r_chosen must be a float tensor \(b,\); got list \[1.0\]",
    ),
    (
        lambda: preference.bradley_terry_loss(X, torch.ones(3, dtype=torch.long)),
        TypeError,
        r"r_rejected must be a float tensor \(b,\); got torch.int64 tensor of shape "
        r"\(3,\)",
    ),
    (
        lambda: preference.bradley_terry_loss(X[None], Y[None]),
        ValueError,
        r"r_chosen must be \(b,\); got shape \(1, 3\)",
    ),
    (
        lambda: preference.bradley_terry_loss(X, torch.ones(4)),
        ValueError,
        r"bradley_terry_loss: r_rejected must have the shape of r_chosen \(3,\); "
        r"got \(4,\)",
    ),
    (
        lambda: preference.RewardModel(torch.nn.Linear(2, 2)),
        TypeError,
        r"body must be a gpt.GPT; got Linear",
    ),
    (
        lambda: preference.RewardModel(model())(IDS.float()),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids; got torch.float32",
    ),
    (
        lambda: preference.RewardModel(model())(torch.zeros(2, 9, dtype=torch.long)),
        ValueError,
        r"ids has 9 positions; the model takes 1 to seq_len = 8",
    ),
    (
        lambda: preference.RewardModel(model())(IDS, [4, 4]),
        TypeError,
        r"last must be a long tensor \(b,\) or None; got list \[4, 4\]",
    ),
    (
        lambda: preference.RewardModel(model())(IDS, torch.tensor([4, 5])),
        ValueError,
        r"last must hold one position in 0..4 per sequence, shape \(2,\); got "
        r"torch.int64 tensor of shape \(2,\)",
    ),
    (
        lambda: preference.RewardModel(model())(IDS, torch.tensor([4])),
        ValueError,
        r"last must hold one position in 0..4 per sequence, shape \(2,\)",
    ),
    (
        lambda: preference.dpo_loss(X, Y, X, torch.ones(2), 0.1),
        ValueError,
        r"dpo_loss: ref_rejected must have the shape of pi_chosen \(3,\); got \(2,\)",
    ),
    (
        lambda: preference.dpo_loss(X, Y, X, None, 0.1),
        TypeError,
        r"ref_rejected must be a float tensor \(b,\); got NoneType None",
    ),
    (
        lambda: preference.dpo_loss(X, Y, X, Y, 0.0),
        ValueError,
        r"beta must be a finite number in \(0, inf\); got float 0.0",
    ),
    (
        lambda: preference.dpo_loss(X, Y, X, Y, True),
        ValueError,
        r"beta must be a finite number in \(0, inf\); got bool True",
    ),
    (
        lambda: preference.sequence_kl(X, Y, "k2"),
        ValueError,
        r"estimator must be one of \('k1', 'k3'\); got str 'k2'",
    ),
    (
        lambda: preference.sequence_kl(X, torch.ones(2, 3)),
        ValueError,
        r"ref_logp must be \(b,\); got shape \(2, 3\)",
    ),
    # empty batches: the mean of nothing is NaN
    (lambda: preference.bradley_terry_loss(E, E), ValueError,
     r"r_chosen must not be empty; got shape \(0,\)"),
    (lambda: preference.dpo_loss(E, E, E, E), ValueError,
     r"pi_chosen must not be empty; got shape \(0,\)"),
    (lambda: preference.sequence_kl(E, E), ValueError,
     r"logp must not be empty; got shape \(0,\)"),
    # probabilities where log-probabilities belong
    (lambda: preference.dpo_loss(-Y, -Y, -Y, Y / 2), ValueError,
     r"ref_rejected must hold log-probabilities \(<= 0, not NaN\); got a largest "
     r"value of 0.5 \(probabilities instead of their logarithms\?\)"),
    (lambda: preference.sequence_kl(Y, X), ValueError,
     r"logp must hold log-probabilities \(<= 0, not NaN\); got a largest value of 1"),
    (lambda: preference.sequence_kl(X, X * float("nan"), "k3"), ValueError,
     r"ref_logp must hold log-probabilities \(<= 0, not NaN\); got a largest value "
     r"of nan"),
    (lambda: preference.RewardModel(model())(IDS[:0]), ValueError,
     r"ids must hold one sequence at least; got shape \(0, 5\)"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
