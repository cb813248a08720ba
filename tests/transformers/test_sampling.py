"""lecturelib.transformers.sampling (chapter 10, sampling): the chi-square test against its definition and
its power, processors against their definitions, samplers against their distributions (with a
wrong distribution that must be rejected), contrastive and constrained decoding."""

from __future__ import annotations

import math

import pytest
import regex
import torch

from lecturelib import check
from lecturelib.transformers import decoding, sampling

START = torch.zeros(1, 1, dtype=torch.long)


def constant(logits: torch.Tensor) -> decoding.Step:
    return lambda prefixes: logits.expand(len(prefixes), -1)


def draws(logits: torch.Tensor, process, n: int = 20000, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    step = decoding.pipe(constant(logits), process)
    out = sampling.sample(step, torch.zeros(n, 1, dtype=torch.long), 1, generator=g)
    check.shape(out, "b t", b=n, t=2)
    return out[:, 1]


# ---- the chi-square test -------------------------------------------------------------------

def test_chi_square_known_answers():
    draws_ = torch.tensor([0] * 10 + [1] * 20 + [2] * 30)
    uniform = torch.full((3,), 1 / 3, dtype=torch.float64)
    # statistic (10² + 0 + 10²) / 20 = 10 on 2 degrees of freedom: p = exp(-10 / 2)
    assert sampling.chi_square(draws_, uniform) == pytest.approx(math.exp(-5), rel=1e-12)
    assert sampling.chi_square(draws_, 7 * uniform) == pytest.approx(math.exp(-5), rel=1e-12)
    exact = torch.tensor([10.0, 20.0, 30.0], dtype=torch.float64)
    assert sampling.chi_square(draws_, exact) == pytest.approx(1.0)  # counts = expectation
    assert sampling.chi_square(draws_, torch.tensor([0.5, 0.5, 0.0])) == 0.0  # impossible draw
    # bins expected fewer than 5 times are pooled: 60 draws, 3 rare bins of 1 expected each
    rare = torch.tensor([57, 1, 1, 1], dtype=torch.float64) / 60
    pooled = torch.tensor([0] * 57 + [1, 1, 2])  # pooled bin: observed 3, expected 3
    assert sampling.chi_square(pooled, rare) == pytest.approx(1.0)


def test_chi_square_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    g = torch.Generator().manual_seed(0)
    probs = torch.rand(12, generator=g, dtype=torch.float64)
    draws_ = torch.multinomial(probs, 500, replacement=True, generator=g)
    counts = torch.bincount(draws_, minlength=12).double()
    expected = probs / probs.sum() * 500
    assert (expected >= 5).all()  # no pooling: the plain test
    reference = stats.chisquare(counts.numpy(), expected.numpy()).pvalue
    assert sampling.chi_square(draws_, probs) == pytest.approx(reference, rel=1e-9)


def test_chi_square_rejects_a_wrong_distribution_and_keeps_its_level_on_the_right_one():
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(10, generator=g, dtype=torch.float64), -1)
    wrong = torch.softmax(probs.log() / 1.3, -1)  # the same distribution at temperature 1.3
    p_right, p_wrong = [], []
    for _ in range(200):
        d = torch.multinomial(probs, 5000, replacement=True, generator=g)
        p_right.append(sampling.chi_square(d, probs))
        p_wrong.append(sampling.chi_square(d, wrong))
    p_right, p_wrong = torch.tensor(p_right), torch.tensor(p_wrong)
    assert 0.01 <= (p_right < 0.05).float().mean() <= 0.10  # about 5% false alarms at 0.05
    assert 0.35 <= p_right.median() <= 0.65  # p-values are uniform under the right one
    assert (p_wrong < 1e-3).all()  # and the wrong one is always rejected


# ---- processors -------------------------------------------------------------------------

def test_processors_known_answers():
    z = torch.tensor([1.0, 3.0, 2.0, 3.0])
    check.close(sampling.temperature(z, 2.0), z / 2)
    assert sampling.top_k(z, 2).tolist() == [-math.inf, 3.0, -math.inf, 3.0]
    assert sampling.top_k(z, 3).tolist() == [-math.inf, 3.0, 2.0, 3.0]  # ties with the 3rd
    assert torch.equal(sampling.top_k(z, 4), z)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    assert (sampling.top_p(p.log(), 0.5) > -math.inf).tolist() == [True, False, False, False]
    assert (sampling.top_p(p.log(), 0.8) > -math.inf).tolist() == [True, True, False, False]
    assert (sampling.top_p(p.log(), 0.81) > -math.inf).tolist() == [True, True, True, False]
    assert torch.equal(sampling.top_p(p.log(), 1.0), p.log())


def test_processors_work_on_batches_and_keep_unmasked_logits():
    torch.manual_seed(0)
    z = torch.randn(5, 7, 11)
    for out in (sampling.top_k(z, 3), sampling.top_p(z, 0.6), sampling.temperature(z, 0.5)):
        check.shape(out, "a b v", a=5, b=7, v=11)
    kept = sampling.top_k(z, 3) > -math.inf
    assert (kept.sum(-1) == 3).all()
    assert torch.equal(sampling.top_k(z, 3)[kept], z[kept])


def test_top_p_keeps_the_smallest_set_that_reaches_p():
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        z = 2 * torch.randn(20, generator=g, dtype=torch.float64)
        p = float(torch.rand(1, generator=g)) * 0.98 + 0.01
        kept = sampling.top_p(z, p) > -math.inf
        probs = z.softmax(-1)
        assert probs[kept].sum() >= p - 1e-12  # enough mass ...
        assert probs[kept].sum() - probs[kept].min() < p  # ... and no token to spare
        rest = torch.cat([probs[~kept], torch.zeros(1, dtype=probs.dtype)])
        assert probs[kept].min() >= rest.max()  # the top-ranked tokens


def test_temperature_limits_and_order():
    torch.manual_seed(0)
    z = torch.randn(50, dtype=torch.float64)
    assert sampling.temperature(z, 1e-6).softmax(-1)[z.argmax()] > 1 - 1e-9
    check.close(sampling.temperature(z, 1e6).softmax(-1), torch.full((50,), 0.02), atol=1e-6)
    for T in (0.1, 0.5, 3.0):
        assert torch.equal(sampling.temperature(z, T).argsort(), z.argsort())


# ---- samplers -----------------------------------------------------------------------------

SAMPLERS = {  # name: (processor, a slightly wrong processor)
    "plain": (lambda z: z, lambda z: sampling.temperature(z, 1.1)),
    "temperature": (lambda z: sampling.temperature(z, 0.7), lambda z: sampling.temperature(z, 0.8)),
    "top-k": (lambda z: sampling.top_k(z, 5), lambda z: sampling.top_k(z, 6)),
    "top-p": (lambda z: sampling.top_p(z, 0.8), lambda z: sampling.top_p(z, 0.9)),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_each_sampler_draws_from_its_defined_distribution(name):
    process, wrong = SAMPLERS[name]
    z = 1.5 * torch.randn(20, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    tokens = draws(z, process)
    assert sampling.chi_square(tokens, process(z).softmax(-1)) > 1e-3
    assert sampling.chi_square(tokens, wrong(z).softmax(-1)) < 1e-6  # the test has power


def test_ancestral_sampling_draws_whole_sequences_from_the_model():
    tree = decoding.TreeLM(3, 3, seed=0, scale=1.5)
    p = torch.zeros(27, dtype=torch.float64)
    for h in decoding.exhaustive_search(tree, START[0], 3):
        p[h.tokens[0] * 9 + h.tokens[1] * 3 + h.tokens[2]] = math.exp(h.logprob)
    check.close(p.sum(), torch.tensor(1.0, dtype=torch.float64))
    g = torch.Generator().manual_seed(0)
    seqs = sampling.sample(tree, torch.zeros(20000, 1, dtype=torch.long), 3, generator=g)[:, 1:]
    codes = seqs @ torch.tensor([9, 3, 1])
    assert sampling.chi_square(codes, p) > 1e-3
    assert sampling.chi_square(codes, p.roll(1)) < 1e-6


def test_sample_refuses_rows_without_any_allowed_token():
    step = constant(torch.full((4,), -math.inf))
    with pytest.raises(ValueError, match="nothing to sample"):
        sampling.sample(step, START, 1)


# ---- contrastive and constrained decoding -----------------------------------------------

def test_contrastive_scores_known_answers():
    strong, weak = torch.tensor([2.0, 1.5, 0.0, -3.0]), torch.tensor([3.0, 0.0, 0.0, -9.0])
    scores = sampling.contrastive(strong, weak, 0.1)
    log_s, log_w = strong.log_softmax(-1).double(), weak.log_softmax(-1).double()
    plausible = strong.softmax(-1) >= 0.1 * strong.softmax(-1).max()
    assert plausible.tolist() == [True, True, True, False]
    check.close(scores[plausible], (log_s - log_w)[plausible])
    assert scores[3] == -math.inf and scores.argmax() == 1
    assert (sampling.contrastive(strong, weak, 1.0) > -math.inf).tolist() == [
        True, False, False, False]  # alpha = 1: only the strong model's favourite
    assert (sampling.contrastive(strong, weak, 0.0) > -math.inf).all()
    same = sampling.contrastive(strong, strong, 0.1)  # a weak model equal to the strong one
    assert torch.equal(same[plausible], torch.zeros(3, dtype=torch.float64))


def test_contrastive_with_a_uniform_weak_model_is_greedy():
    tree = decoding.TreeLM(4, 5, seed=1, scale=2.0)
    uniform = constant(torch.zeros(4))
    cd = sampling.contrastive_step(tree, uniform, 0.1)
    assert torch.equal(decoding.greedy(cd, START, 5), decoding.greedy(tree, START, 5))


def test_constrain_masks_forbidden_tokens_and_rejects_bad_masks():
    step = constant(torch.zeros(4))
    even = sampling.constrain(step, lambda p: torch.tensor([True, False, True, False])
                              .expand(len(p), -1))
    assert (sampling.sample(even, torch.zeros(50, 1, dtype=torch.long), 5) % 2 == 0).all()
    with pytest.raises(ValueError, match="bool mask of shape"):
        sampling.constrain(step, lambda p: torch.ones(len(p), 3, dtype=torch.bool))(START)
    with pytest.raises(ValueError, match="allows no token"):
        sampling.constrain(step, lambda p: torch.zeros(len(p), 4, dtype=torch.bool))(START)


def test_regex_constraint_makes_every_output_match():
    pattern = r"(0[1-9]|1[0-2])/[0-9]{2}"  # a month and a year, MM/YY
    chars = [*"0123456789/", "</s>"]
    eos = len(chars) - 1
    g = torch.Generator().manual_seed(0)
    table = 2 * torch.randn(len(chars), len(chars), generator=g)

    def step(prefixes):
        return table[prefixes[:, -1]]

    allowed = sampling.regex_allowed(pattern, chars, eos, n_prompt=1)
    begin = torch.full((100, 1), eos)
    out = sampling.sample(sampling.constrain(step, allowed), begin, 8, eos, generator=g)
    texts = ["".join(chars[t] for t in row if t != eos) for row in out[:, 1:].tolist()]
    assert all(regex.fullmatch(pattern, t) for t in texts)
    assert len(set(texts)) > 10
    free = sampling.sample(step, begin, 8, eos, generator=g)
    assert not all(regex.fullmatch(pattern, "".join(chars[t] for t in row if t != eos))
                   for row in free[:, 1:].tolist())  # without the mask, outputs break it
    mask = allowed(torch.tensor([[eos, 1, 2, 10, 9, 9]]))  # "12/99": only eos may follow
    assert mask[0].tolist() == [False] * eos + [True]
    with pytest.raises(ValueError, match=r"eos must be an int in 0\.\.11"):
        sampling.regex_allowed(pattern, chars, 99, 1)


