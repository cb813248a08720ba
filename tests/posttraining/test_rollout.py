"""lecturelib.posttraining.rollout: token log-probabilities read each token from its
prefix, the sampler draws from the model, and a GRPO step learns."""

from __future__ import annotations

import copy

import pytest
import torch

from lecturelib.posttraining import rollout
from lecturelib.pretraining import gpt


def tiny_gpt(seed: int = 0, vocab_size: int = 6) -> gpt.GPT:
    torch.manual_seed(seed)
    config = gpt.GPTConfig(
        vocab_size=vocab_size, seq_len=12, d_model=16, n_layers=1, n_heads=2
    )
    return gpt.GPT(config)


# ----------------------------------------------------------------------------- sampling


def test_token_logprobs_score_each_token_from_its_prefix_even_right_padded():
    model = tiny_gpt().eval()
    ids = torch.randint(0, 6, (3, 9), generator=torch.Generator().manual_seed(2))
    got = rollout.token_logprobs(model, ids)
    assert got.shape == (3, 9) and torch.equal(got[:, 0], torch.zeros(3))
    for j in (1, 4, 8):
        step = torch.log_softmax(model(ids[:, :j])[:, -1], -1)  # (b, v)
        torch.testing.assert_close(got[:, j], step.gather(1, ids[:, j : j + 1])[:, 0])
    padded = torch.cat([ids[:, :5], torch.zeros(3, 4, dtype=torch.long)], 1)
    torch.testing.assert_close(rollout.token_logprobs(model, padded)[:, :5], got[:, :5])


def test_sample_draws_the_first_token_from_the_model_distribution():
    model = tiny_gpt(3).eval()
    with torch.no_grad():
        model.head.weight.mul_(40)  # a peaked, non-uniform next-token distribution
    prompt = torch.tensor([1, 2, 3])
    probs = torch.softmax(model(prompt[None])[0, -1] / 0.7, -1)
    out = rollout.sample(
        model,
        [prompt] * 4000,
        1,
        eos=0,
        temperature=0.7,
        generator=torch.Generator().manual_seed(0),
    )
    freq = torch.bincount(torch.cat(out), minlength=6) / 4000
    torch.testing.assert_close(freq, probs, atol=0.025, rtol=0)
    assert probs.max() - probs.min() > 0.3


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_prompts_of_other_lengths_in_the_batch_change_nothing(positions):
    torch.manual_seed(8)
    config = gpt.GPTConfig(
        vocab_size=6, seq_len=12, d_model=16, n_layers=2, n_heads=2, positions=positions
    )
    model = gpt.GPT(config).eval()
    with torch.no_grad():
        model.head.weight.mul_(40)
    prompts = [torch.tensor([1, 2]), torch.tensor([3, 1, 4, 1, 5]), torch.tensor([2])]

    def greedy(batch):  # a tiny temperature: the most likely token
        return rollout.sample(model, batch, 5, eos=0, temperature=1e-4)

    together = greedy(prompts)
    alone = [greedy([p])[0] for p in prompts]
    assert all(torch.equal(a, b) for a, b in zip(together, alone))
    assert len({tuple(r.tolist()) for r in together}) > 1
    naive = model(torch.tensor([[0, 0, 0, 1, 2]]))[0, -1]  # padding seen: other logits
    assert not torch.allclose(naive, model(prompts[0][None])[0, -1], atol=1e-3)


def test_sampled_responses_stop_at_eos_and_within_the_context():
    model = tiny_gpt(4).eval()
    prompts = [torch.tensor([1, 2, 3, 4])] * 100 + [torch.tensor([1, 2])] * 100
    out = rollout.sample(
        model, prompts, 20, eos=0, generator=torch.Generator().manual_seed(1)
    )
    assert max(len(r) for r in out) == 12 - 4  # cut at the model's seq_len
    for r in out:
        assert (r[:-1] != 0).all()  # eos, if any, only at the end
    assert any(r[-1] == 0 for r in out) and any(r[-1] != 0 for r in out)
    again = rollout.sample(
        model, prompts, 20, eos=0, generator=torch.Generator().manual_seed(1)
    )
    assert all(torch.equal(a, b) for a, b in zip(out, again))


def test_pad_right_marks_the_response_tokens():
    ids, mask = rollout.pad_right(
        [torch.tensor([5, 6]), torch.tensor([7])],
        [torch.tensor([1, 0]), torch.tensor([2, 3, 0])],
        pad=0,
    )
    assert ids.tolist() == [[5, 6, 1, 0], [7, 2, 3, 0]]
    assert mask.tolist() == [[False, False, True, True], [False, True, True, True]]


CHARS = "|abc"  # id 0 "|" ends a response


def encode(text: str) -> torch.Tensor:
    return torch.tensor([CHARS.index(c) for c in text])


def decode(ids: torch.Tensor) -> str:
    return "".join(CHARS[i] for i in ids.tolist())


def test_sampler_returns_each_prompts_group_together():
    model = tiny_gpt(5, vocab_size=4).eval()
    sample_fn = rollout.sampler(encode, decode, eos=0, max_new=4, seed=0)
    prompts = ["ab", "cab", "b"]
    ids, mask, texts = sample_fn(model, prompts, 3)
    assert ids.shape[0] == 9 and mask.shape == ids.shape and len(texts) == 9
    for i, text in enumerate(texts):
        prompt = prompts[i // 3]
        row, m = ids[i], mask[i]
        assert decode(row[: len(prompt)]) == prompt and not m[: len(prompt)].any()
        response = row[m]
        assert decode(response).removesuffix("|") == text and "|" not in text
        end = len(prompt) + len(response)
        assert m.nonzero().max() + 1 == end  # nothing marked in the padding


# ---------------------------------------------------------------------- a GRPO step


def first_token_reward(prompt: str, response: str) -> float:
    """1 when the response starts with the letter after the prompt's last one."""
    return float(response[:1] == {"a": "b", "b": "c", "c": "a"}[prompt[-1]])


def test_grpo_step_learns_a_verifiable_reward():
    policy = tiny_gpt(7, vocab_size=4)
    reference = copy.deepcopy(policy).eval()
    opt = torch.optim.Adam(policy.parameters(), lr=5e-2)
    sample_fn = rollout.sampler(encode, decode, eos=0, max_new=2, seed=1)
    prompts = ["ca", "ab", "bc"]
    rewards = []
    for _ in range(40):
        stats = rollout.grpo_step(
            policy,
            reference,
            opt,
            prompts,
            sample_fn,
            first_token_reward,
            group_size=16,
            beta=0.04,
        )
        rewards.append(stats["reward"])
        assert stats["kl"] >= 0 and len(stats["responses"]) == 48
    assert sum(rewards[:3]) / 3 < 0.4 and sum(rewards[-3:]) / 3 > 0.9
    assert stats["kl"] > 0.01  # it left the reference to get there


def test_a_group_with_equal_rewards_teaches_nothing():
    policy = tiny_gpt(7, vocab_size=4)
    before = copy.deepcopy(policy.state_dict())
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    sample_fn = rollout.sampler(encode, decode, eos=0, max_new=3, seed=2)
    stats = rollout.grpo_step(
        policy,
        copy.deepcopy(policy),
        opt,
        ["ab", "c"],
        sample_fn,
        lambda p, r: True,
        group_size=4,
        beta=0.0,
        iterations=2,
    )
    assert stats["reward"] == 1.0 and stats["loss"] == 0.0
    for name, value in policy.state_dict().items():
        assert torch.equal(value, before[name]), name
