"""Bad input to lecturelib.posttraining.rl: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import rl


L, L2 = torch.zeros(3), torch.zeros(3, 4)
MASK = torch.ones(3, 4, dtype=torch.bool)
E, E2 = torch.zeros(0), torch.zeros(0, 4)


CASES = [
    (
        lambda: rl.reinforce_loss(L, torch.zeros(4)),
        ValueError,
        r"rewards must have the shape of logprobs \(3,\); got \(4,\)",
    ),
    (
        lambda: rl.reinforce_loss(L, L, "mean"),
        TypeError,
        r"baseline must be a number or a tensor; got str 'mean'",
    ),
    (
        lambda: rl.reinforce_loss(L, L, float("nan")),
        TypeError,
        r"baseline must be a number or a tensor; got float nan",
    ),
    (
        lambda: rl.reinforce_loss(L, L, torch.zeros(2)),
        ValueError,
        r"baseline must be a number, a \(\) tensor or \(b,\) = \(3,\); "
        r"got shape \(2,\)",
    ),
    (
        lambda: rl.reinforce_loss(L2, L2),
        ValueError,
        r"logprobs must be \(b,\); got shape \(3, 4\)",
    ),
    (
        lambda: rl.ppo_clipped_loss(L2[None], L2[None], L),
        ValueError,
        r"logp_new must be \(b,\) or \(b, t\); got shape \(1, 3, 4\)",
    ),
    (
        lambda: rl.ppo_clipped_loss(L2, L, L),
        ValueError,
        r"logp_old must have the shape of logp_new \(3, 4\); got \(3,\)",
    ),
    (
        lambda: rl.ppo_clipped_loss(L2, L2, torch.zeros(4)),
        ValueError,
        r"advantages must be \(b,\) = \(3,\) or the shape of logp_new \(3, 4\); "
        r"got \(4,\)",
    ),
    (
        lambda: rl.ppo_clipped_loss(L, L, L, clip=1.5),
        ValueError,
        r"clip must be a finite number in \(0, 1\]; got float 1.5",
    ),
    (
        lambda: rl.ppo_clipped_loss(L, L, L, clip=0),
        ValueError,
        r"clip must be a finite number in \(0, 1\]; got int 0",
    ),
    (
        lambda: rl.group_advantages(torch.zeros(6), 4),
        ValueError,
        r"rewards must hold whole groups of group_size=4 \(n·g values, each prompt's g "
        r"together\); got 6",
    ),
    (
        lambda: rl.group_advantages(torch.zeros(6), 1),
        ValueError,
        r"group_size must be an int >= 2; got int 1",
    ),
    (
        lambda: rl.group_advantages(torch.tensor([1, 0]), 2),
        TypeError,
        r"rewards must be a float tensor \(n·g,\); got torch.int64 tensor",
    ),
    (
        lambda: rl.group_advantages(torch.zeros(4), 2, normalise=1),
        TypeError,
        r"normalise must be a bool; got int 1",
    ),
    (
        lambda: rl.group_advantages(torch.zeros(4), 2, eps=-1.0),
        ValueError,
        r"eps must be a finite number in \[0, inf\); got float -1.0",
    ),
    (
        lambda: rl.kl_k3(L2, L),
        ValueError,
        r"ref_logp must have the shape of logp \(3, 4\); got \(3,\)",
    ),
    (
        lambda: rl.masked_mean(L2, MASK.float()),
        TypeError,
        r"mask must be a bool tensor \(b, t\); got torch.float32 tensor",
    ),
    (
        lambda: rl.masked_mean(L2, MASK[:, :2]),
        ValueError,
        r"mask must have the shape of the log-probabilities \(3, 4\); got \(3, 2\)",
    ),
    (
        lambda: rl.grpo_loss(L, L, L, L, MASK),
        ValueError,
        r"logp must be \(b, t\); got shape \(3,\)",
    ),
    (
        lambda: rl.grpo_loss(L2, L2, L2, L, MASK, beta=-0.1),
        ValueError,
        r"beta must be a finite number in \[0, inf\); got float -0.1",
    ),
    (
        lambda: rl.grpo_loss(L2, L2, L2, L, MASK.T),
        ValueError,
        r"mask must have the shape of the log-probabilities \(3, 4\); got \(4, 3\)",
    ),
    (
        lambda: rl.same_characters(12, "12"),
        TypeError,
        r"answer must be a str; got int 12",
    ),
    (
        lambda: rl.same_characters("12", None),
        TypeError,
        r"response must be a str; got NoneType None",
    ),
    # empty batches (a mean of nothing is NaN) and batches that mark nothing
    (lambda: rl.reinforce_loss(E, E), ValueError,
     r"logprobs must not be empty; got shape \(0,\)"),
    (lambda: rl.ppo_clipped_loss(E, E, E), ValueError,
     r"logp_new must not be empty; got shape \(0,\)"),
    (lambda: rl.ppo_clipped_loss(E2, E2, E), ValueError,
     r"logp_new must not be empty; got shape \(0, 4\)"),
    (lambda: rl.kl_k3(E2, E2), ValueError, r"logp must not be empty; got shape \(0, 4\)"),
    (lambda: rl.masked_mean(E2, E2.bool()), ValueError,
     r"mask marks no token \(shape \(0, 4\)\): there is nothing to average"),
    (lambda: rl.masked_mean(L2, ~MASK), ValueError,
     r"mask marks no token \(shape \(3, 4\)\): there is nothing to average"),
    (lambda: rl.grpo_loss(E2, E2, E2, E, E2.bool()), ValueError,
     r"logp must not be empty; got shape \(0, 4\)"),
    (lambda: rl.grpo_loss(L2, L2, L2, L, ~MASK), ValueError, r"mask marks no token"),
    (lambda: rl.group_advantages(E, 2), ValueError,
     r"rewards must hold whole groups of group_size=2 .*; got 0"),
    # probabilities where log-probabilities belong (or NaN)
    (lambda: rl.reinforce_loss(torch.full((3,), 0.5), L), ValueError,
     r"logprobs must hold log-probabilities \(<= 0, not NaN\); got a largest value of "
     r"0.5 \(probabilities instead of their logarithms\?\)"),
    (lambda: rl.kl_k3(L2, torch.full((3, 4), float("nan"))), ValueError,
     r"ref_logp must hold log-probabilities \(<= 0, not NaN\); got a largest value "
     r"of nan"),
    (lambda: rl.grpo_loss(L2 + 0.2, L2, L2, L, MASK), ValueError,
     r"logp must hold log-probabilities \(<= 0, not NaN\); got a largest value of 0.2"),
    (lambda: rl.grpo_loss(L2, L2, L2 + 1, L, MASK), ValueError,
     r"ref_logp must hold log-probabilities"),
    (lambda: rl.kl_k3(L, L), ValueError, r"logp must be \(b, t\); got shape \(3,\)"),
    (lambda: rl.kl_k3(L2[None], L2[None]), ValueError,
     r"logp must be \(b, t\); got shape \(1, 3, 4\)"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
