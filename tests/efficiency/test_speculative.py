"""lecturelib.efficiency.speculative: the rule's output distribution is the target's (enumerated and
sampled), greedy speculation equals greedy decoding, and the speed-up formulas."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.efficiency import kvcache, ngram_draft, speculative
from lecturelib.pretraining import gpt
from lecturelib.transformers import decoding, sampling


def as_dist(tree):
    return lambda prefix: tree(torch.tensor([(0,) + prefix])).softmax(-1)[0]


def small_gpt(seed: int, d_model: int = 16, n_layers: int = 1) -> gpt.GPT:
    torch.manual_seed(seed)
    config = gpt.GPTConfig(vocab_size=7, seq_len=32, d_model=d_model, n_layers=n_layers,
                           n_heads=2)
    return gpt.GPT(config).eval()


def test_residual_is_what_p_holds_beyond_q():
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
    assert torch.allclose(speculative.residual(p, q), torch.tensor([1.0, 0, 0],
                                                                    dtype=torch.float64))
    assert torch.equal(speculative.residual(p, p), p)


def test_first_token_distribution_is_p_and_the_wrong_rule_is_not():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        p, q = torch.rand(6, generator=g).softmax(0), torch.rand(6, generator=g).softmax(0)
        assert torch.allclose(speculative.first_token_distribution(p, q), p.double(),
                              atol=1e-12)
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.6, 0.2])
    wrong = speculative.first_token_distribution(p, q, "resample_from_p")
    assert (wrong - p.double()).abs().max() > 0.05


@pytest.mark.parametrize("K", [1, 2, 3])
def test_enumerated_sequences_match_the_target(K):
    p, q = as_dist(decoding.TreeLM(3, 8, seed=0)), as_dist(decoding.TreeLM(3, 8, seed=1))
    target = speculative.sequence_probs(p, (), 3)
    spec = speculative.sequence_distribution(p, q, (), K, 3)
    assert set(spec) == set(target) and math.isclose(sum(spec.values()), 1.0)
    assert max(abs(spec[s] - target[s]) for s in target) < 1e-12
    wrong = speculative.sequence_distribution(p, q, (), K, 3, "resample_from_p")
    assert max(abs(wrong[s] - target[s]) for s in target) > 1e-3


def test_sampled_first_tokens_pass_the_chi_square_test_and_the_wrong_rule_fails():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    rows = torch.stack([p, p])
    draws = {}
    for rule in speculative.RULES:
        out = []
        for _ in range(4000):
            x = torch.multinomial(q, 1, generator=g)
            n, nxt = speculative.verify(rows, q[None], x, g, rule)
            out.append(x.item() if n == 1 else nxt)
        draws[rule] = torch.tensor(out)
    assert sampling.chi_square(draws["exact"], p) > 0.01
    assert sampling.chi_square(draws["resample_from_p"], p) < 1e-6


def test_verify_accepts_everything_when_draft_equals_target():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([[0.2, 0.8], [0.5, 0.5], [0.9, 0.1]])
    n, nxt = speculative.verify(p, p[:2], torch.tensor([1, 0]), g)
    assert n == 2 and nxt in (0, 1)


def test_verify_greedy_keeps_the_matching_prefix():
    p = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    assert speculative.verify_greedy(p, torch.tensor([1, 1])) == (1, 0)
    assert speculative.verify_greedy(p, torch.tensor([1, 0])) == (2, 1)


@pytest.mark.parametrize("K", [1, 3, 5])
def test_greedy_speculative_equals_greedy(K):
    target, draft = small_gpt(0, 32, 2), small_gpt(1)
    prompt = torch.tensor([[1, 2, 3, 4]])
    reference = kvcache.generate(target, prompt, 20)[0]
    ids, stats = speculative.speculative_generate(target, draft, prompt, 20, K,
                                                  temperature=0)
    assert torch.equal(ids, reference)
    assert stats["drafted"] == K * stats["target_calls"]
    assert stats["accepted"] <= stats["tested"] <= stats["drafted"]


def test_sampling_with_the_target_as_its_own_draft_accepts_every_token():
    target = small_gpt(0)
    g = torch.Generator().manual_seed(0)
    ids, stats = speculative.speculative_generate(target, target, torch.tensor([[1, 2]]),
                                                  12, 3, generator=g)
    assert ids.shape == (1, 14) and stats["accepted"] == stats["tested"] == 9
    assert stats["target_calls"] == 3  # 4 tokens per call


@pytest.mark.parametrize("K", [1, 4])
def test_greedy_speculative_with_an_ngram_draft_equals_greedy(K):
    target = small_gpt(0, 32, 2)
    text = kvcache.generate(target, torch.tensor([[1, 2, 3, 4]]), 60)[0][0]
    ngram = ngram_draft.NGramDraft(text, order=3, vocab_size=7)  # learns the target
    prompt = torch.tensor([[2, 5, 1]])
    reference = kvcache.generate(target, prompt, 20)[0]
    ids, stats = speculative.speculative_generate(target, ngram, prompt, 20, K,
                                                  temperature=0)
    assert torch.equal(ids, reference)
    assert stats["accepted"] <= stats["tested"] <= stats["drafted"]


def test_sampling_with_an_ngram_draft_draws_from_the_target():
    target = small_gpt(0)
    ngram = ngram_draft.NGramDraft(torch.randint(0, 7, (300,), generator=torch.Generator(
    ).manual_seed(0)), order=2, vocab_size=7)
    prompt = torch.tensor([[1, 2]])
    with torch.no_grad():
        p = target(prompt)[0, -1].double().softmax(-1)
    g = torch.Generator().manual_seed(0)
    first = torch.tensor([speculative.speculative_generate(
        target, ngram, prompt, 1, 2, generator=g)[0][0, -1].item() for _ in range(3000)])
    assert sampling.chi_square(first, p) > 0.001


def test_autoregressive_generate_greedy_equals_kvcache_generate():
    target = small_gpt(0)
    prompt = torch.tensor([[3, 1]])
    ids, stats = speculative.autoregressive_generate(target, prompt, 9, temperature=0)
    assert torch.equal(ids, kvcache.generate(target, prompt, 9)[0])
    assert stats["target_calls"] == 9


def test_speedup_formulas():
    assert speculative.expected_tokens(0.0, 4) == 1.0
    assert math.isclose(speculative.expected_tokens(0.5, 2), 1.75)
    assert math.isclose(speculative.expected_tokens(1.0, 3), 4.0)
    assert math.isclose(speculative.speedup(0.5, 2, 0.25), 1.75 / 1.5)
