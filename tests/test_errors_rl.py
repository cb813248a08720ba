"""Bad input to lecturelib.posttraining.rl: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import rl
from lecturelib.pretraining import gpt


def model():
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(vocab_size=4, seq_len=8, d_model=16, n_layers=1, n_heads=2)
    )


def sample_fn(model, prompts, group_size):
    """A stand-in sampler: every response is token 1, then eos 0."""
    n = len(prompts) * group_size
    ids = torch.tensor([[2, 1, 0]]).repeat(n, 1)
    return ids, torch.tensor([[False, True, True]]).repeat(n, 1), ["a"] * n


def step(**kw):
    policy = model()
    args = dict(
        policy=policy,
        reference=model(),
        optimizer=torch.optim.SGD(policy.parameters(), lr=0.1),
        prompts=["x"],
        sample_fn=sample_fn,
        reward_fn=lambda p, r: 1.0,
        group_size=2,
    )
    args.update(kw)
    return rl.grpo_step(**args)


L, L2 = torch.zeros(3), torch.zeros(3, 4)
MASK = torch.ones(3, 4, dtype=torch.bool)
P = torch.tensor([1, 2])

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
        lambda: rl.token_logprobs(model(), L2),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids; got torch.float32",
    ),
    (
        lambda: rl.sample(torch.nn.Linear(2, 2), [torch.tensor([1, 2])], 2, 0),
        TypeError,
        r"model must be a gpt.GPT; got Linear",
    ),
    (
        lambda: rl.sample(model(), torch.tensor([[1, 2]]), 2, 0),
        TypeError,
        r"prompts must be a non-empty list of 1-d token id tensors; got torch.int64",
    ),
    (
        lambda: rl.sample(model(), [], 2, 0),
        TypeError,
        r"prompts must be a non-empty list of 1-d token id tensors; got list \[\]",
    ),
    (
        lambda: rl.sample(model(), [P, torch.tensor([1, 5])], 2, 0),
        ValueError,
        r"prompts\[1\] must hold token ids in 0..3; got ids from 1 to 5",
    ),
    (
        lambda: rl.sample(model(), [torch.tensor([[1, 2]])], 2, 0),
        ValueError,
        r"prompts\[0\] must be 1-D \(t,\) token ids; got shape \(1, 2\)",
    ),
    (
        lambda: rl.sample(model(), [P, torch.ones(8, dtype=torch.long)], 2, 0),
        ValueError,
        r"prompts\[1\] has 8 tokens and leaves no room in the model's seq_len = 8",
    ),
    (
        lambda: rl.sample(model(), [P], 0, 0),
        ValueError,
        r"max_new must be an int >= 1; got int 0",
    ),
    (
        lambda: rl.sample(model(), [P], 2, 4),
        ValueError,
        r"eos must be an int in 0..3; got int 4",
    ),
    (
        lambda: rl.sample(model(), [P], 2, 0, 0.0),
        ValueError,
        r"temperature must be a finite number in \(0, inf\); got float 0.0",
    ),
    (
        lambda: rl.sample(model(), [P], 2, 0, 1.0, 7),
        TypeError,
        r"generator must be a torch.Generator; got int 7",
    ),
    (
        lambda: rl.sampler("encode", str, 0, 4),
        TypeError,
        r"encode must be callable; got str",
    ),
    (
        lambda: rl.sampler(str, str, -1, 4),
        ValueError,
        r"eos must be an int >= 0; got int -1",
    ),
    (
        lambda: rl.sampler(str, str, 0, 4, seed=-1),
        ValueError,
        r"seed must be an int >= 0; got int -1",
    ),
    (
        lambda: step(policy="net"),
        TypeError,
        r"policy must be an nn.Module; got str 'net'",
    ),
    (
        lambda: step(optimizer=None),
        TypeError,
        r"optimizer must be a torch.optim.Optimizer; got NoneType None",
    ),
    (
        lambda: step(prompts=[]),
        TypeError,
        r"prompts must be a non-empty list of str; got list \[\]",
    ),
    (
        lambda: step(prompts="x"),
        TypeError,
        r"prompts must be a non-empty list of str; got str 'x'",
    ),
    (
        lambda: step(sample_fn=None),
        TypeError,
        r"sample_fn must be callable; got NoneType None",
    ),
    (
        lambda: step(group_size=1),
        ValueError,
        r"group_size must be an int >= 2; got int 1",
    ),
    (
        lambda: step(iterations=0),
        ValueError,
        r"iterations must be an int >= 1; got int 0",
    ),
    (
        lambda: step(max_norm=0.0),
        ValueError,
        r"max_norm must be a finite number in \(0, inf\); got float 0.0",
    ),
    (
        lambda: step(reward_fn=lambda p, r: "1"),
        TypeError,
        r"reward_fn must return a finite number or a bool; got str '1'",
    ),
    (
        lambda: step(reward_fn=lambda p, r: float("inf")),
        TypeError,
        r"reward_fn must return a finite number or a bool; got float inf",
    ),
    (
        lambda: step(sample_fn=lambda m, p, g: sample_fn(m, p, 1)),
        ValueError,
        r"sample_fn must return 2 sequences \(n·g\); got 1",
    ),
    (
        lambda: step(sample_fn=lambda m, p, g: (*sample_fn(m, p, g)[:2], ["a"])),
        ValueError,
        r"sample_fn must return 2 responses; got 1",
    ),
    (
        lambda: step(
            sample_fn=lambda m, p, g: (sample_fn(m, p, g)[0].float(), None, ["a"] * 2)
        ),
        TypeError,
        r"sample_fn's ids must be an integer \(long\) tensor of token ids",
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
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
