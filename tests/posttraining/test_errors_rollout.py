"""Bad input to lecturelib.posttraining.rollout: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import rollout
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
    return rollout.grpo_step(**args)


L, L2 = torch.zeros(3), torch.zeros(3, 4)
P = torch.tensor([1, 2])


CASES = [
    (
        lambda: rollout.token_logprobs(model(), L2),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids; got torch.float32",
    ),
    (
        lambda: rollout.sample(torch.nn.Linear(2, 2), [torch.tensor([1, 2])], 2, 0),
        TypeError,
        r"model must be a gpt.GPT; got Linear",
    ),
    (
        lambda: rollout.sample(model(), torch.tensor([[1, 2]]), 2, 0),
        TypeError,
        r"prompts must be a non-empty list of 1-d token id tensors; got torch.int64",
    ),
    (
        lambda: rollout.sample(model(), [], 2, 0),
        TypeError,
        r"prompts must be a non-empty list of 1-d token id tensors; got list \[\]",
    ),
    (
        lambda: rollout.sample(model(), [P, torch.tensor([1, 5])], 2, 0),
        ValueError,
        r"prompts\[1\] must hold token ids in 0..3; got ids from 1 to 5",
    ),
    (
        lambda: rollout.sample(model(), [torch.tensor([[1, 2]])], 2, 0),
        ValueError,
        r"prompts\[0\] must be 1-D \(t,\) token ids; got shape \(1, 2\)",
    ),
    (
        lambda: rollout.sample(model(), [P, torch.ones(8, dtype=torch.long)], 2, 0),
        ValueError,
        r"prompts\[1\] has 8 tokens and leaves no room in the model's seq_len = 8",
    ),
    (
        lambda: rollout.sample(model(), [P], 0, 0),
        ValueError,
        r"max_new must be an int >= 1; got int 0",
    ),
    (
        lambda: rollout.sample(model(), [P], 2, 4),
        ValueError,
        r"eos must be an int in 0..3; got int 4",
    ),
    (
        lambda: rollout.sample(model(), [P], 2, 0, 0.0),
        ValueError,
        r"temperature must be a finite number in \(0, inf\); got float 0.0",
    ),
    (
        lambda: rollout.sample(model(), [P], 2, 0, 1.0, 7),
        TypeError,
        r"generator must be a torch.Generator; got int 7",
    ),
    (
        lambda: rollout.sampler("encode", str, 0, 4),
        TypeError,
        r"encode must be callable; got str",
    ),
    (
        lambda: rollout.sampler(str, str, -1, 4),
        ValueError,
        r"eos must be an int >= 0; got int -1",
    ),
    (
        lambda: rollout.sampler(str, str, 0, 4, seed=-1),
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
    # pad_right: as many responses as prompts, never fewer rows silently
    (lambda: rollout.pad_right([P, P], [P], 0), ValueError,
     r"responses must hold one response per prompt \(2\); got 1"),
    (lambda: rollout.pad_right([P], [P, P], 0), ValueError,
     r"responses must hold one response per prompt \(1\); got 2"),
    (lambda: rollout.pad_right([], [], 0), TypeError,
     r"prompts must be a non-empty list of 1-d token id tensors; got list \[\]"),
    (lambda: rollout.pad_right([P], P, 0), TypeError,
     r"responses must be a non-empty list of 1-d token id tensors; got torch.int64"),
    (lambda: rollout.pad_right([P], [P.float()], 0), TypeError,
     r"responses\[0\] must be an integer \(long\) tensor of token ids"),
    (lambda: rollout.pad_right([P[None]], [P], 0), ValueError,
     r"prompts\[0\] must be 1-D \(t,\) token ids; got shape \(1, 2\)"),
    (lambda: rollout.pad_right([P], [P], -1), ValueError,
     r"pad must be an int >= 0; got int -1"),
    (lambda: rollout.token_logprobs("m", P[None]), TypeError,
     r"model must be an nn.Module \(a causal language model\); got str 'm'"),
    (lambda: rollout.token_logprobs(model(), P[None, :1]), ValueError,
     r"ids must have t >= 2 positions; got shape \(1, 1\)"),
    (lambda: rollout.sampler(lambda p: P, str, 0, 2)(model(), "ab", 2), TypeError,
     r"prompts must be a non-empty list of str; got str 'ab'"),
    (lambda: rollout.sampler(lambda p: P, str, 0, 2)(model(), ["a"], 0), ValueError,
     r"group_size must be an int >= 1; got int 0"),
    (lambda: rollout.sampler(lambda p: p, str, 0, 2)(model(), ["ab"], 2), TypeError,
     r"encode\('ab'\) must be an integer \(long\) tensor of token ids; got str 'ab'"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
