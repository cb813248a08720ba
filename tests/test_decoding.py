"""lecturelib.decoding: processors against their definitions, samplers against their
distributions (chi-square, with a wrong distribution that must be rejected), beam search
against exhaustive search, the cached recurrent step against recomputation, contrastive and
constrained decoding, and the repetition metrics."""

from __future__ import annotations

import math

import pytest
import regex
import torch
from scipy import stats

from lecturelib import check, decoding, gated, rnn

START = torch.zeros(1, 1, dtype=torch.long)


def constant(logits: torch.Tensor) -> decoding.Step:
    return lambda prefixes: logits.expand(len(prefixes), -1)


def chi_square(draws: torch.Tensor, probs: torch.Tensor) -> float:
    """p-value that ``draws`` come from ``probs``; bins expected < 5 times are pooled."""
    counts = torch.bincount(draws, minlength=len(probs)).double()
    if counts[probs == 0].sum() > 0:
        return 0.0
    expected = probs.double() / probs.sum() * len(draws)
    big = expected >= 5
    observed = torch.cat([counts[big], counts[~big].sum().view(1)])
    expected = torch.cat([expected[big], expected[~big].sum().view(1)])
    keep = expected > 0
    return float(stats.chisquare(observed[keep], expected[keep]).pvalue)


def draws(logits: torch.Tensor, process, n: int = 20000, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    step = decoding.pipe(constant(logits), process)
    out = decoding.sample(step, torch.zeros(n, 1, dtype=torch.long), 1, generator=g)
    check.shape(out, "b t", b=n, t=2)
    return out[:, 1]


# ---- processors -------------------------------------------------------------------------

def test_processors_known_answers():
    z = torch.tensor([1.0, 3.0, 2.0, 3.0])
    check.close(decoding.temperature(z, 2.0), z / 2)
    assert decoding.top_k(z, 2).tolist() == [-math.inf, 3.0, -math.inf, 3.0]
    assert decoding.top_k(z, 3).tolist() == [-math.inf, 3.0, 2.0, 3.0]  # ties with the 3rd
    assert torch.equal(decoding.top_k(z, 4), z)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    assert (decoding.top_p(p.log(), 0.5) > -math.inf).tolist() == [True, False, False, False]
    assert (decoding.top_p(p.log(), 0.8) > -math.inf).tolist() == [True, True, False, False]
    assert (decoding.top_p(p.log(), 0.81) > -math.inf).tolist() == [True, True, True, False]
    assert torch.equal(decoding.top_p(p.log(), 1.0), p.log())


def test_processors_work_on_batches_and_keep_unmasked_logits():
    torch.manual_seed(0)
    z = torch.randn(5, 7, 11)
    for out in (decoding.top_k(z, 3), decoding.top_p(z, 0.6), decoding.temperature(z, 0.5)):
        check.shape(out, "a b v", a=5, b=7, v=11)
    kept = decoding.top_k(z, 3) > -math.inf
    assert (kept.sum(-1) == 3).all()
    assert torch.equal(decoding.top_k(z, 3)[kept], z[kept])


def test_top_p_keeps_the_smallest_set_that_reaches_p():
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        z = 2 * torch.randn(20, generator=g, dtype=torch.float64)
        p = float(torch.rand(1, generator=g)) * 0.98 + 0.01
        kept = decoding.top_p(z, p) > -math.inf
        probs = z.softmax(-1)
        assert probs[kept].sum() >= p - 1e-12  # enough mass ...
        assert probs[kept].sum() - probs[kept].min() < p  # ... and no token to spare
        rest = torch.cat([probs[~kept], torch.zeros(1, dtype=probs.dtype)])
        assert probs[kept].min() >= rest.max()  # the top-ranked tokens


def test_temperature_limits_and_order():
    torch.manual_seed(0)
    z = torch.randn(50, dtype=torch.float64)
    assert decoding.temperature(z, 1e-6).softmax(-1)[z.argmax()] > 1 - 1e-9
    check.close(decoding.temperature(z, 1e6).softmax(-1), torch.full((50,), 0.02), atol=1e-6)
    for T in (0.1, 0.5, 3.0):
        assert torch.equal(decoding.temperature(z, T).argsort(), z.argsort())


@pytest.mark.parametrize("call, match", [
    (lambda z: decoding.temperature(z, 0.0), "temperature T must be > 0"),
    (lambda z: decoding.temperature(z, -1.0), "temperature T must be > 0"),
    (lambda z: decoding.temperature(z, float("nan")), "temperature T must be > 0"),
    (lambda z: decoding.top_k(z, 0), "k must be an int >= 1"),
    (lambda z: decoding.top_k(z, 2.5), "k must be an int >= 1"),
    (lambda z: decoding.top_p(z, 0.0), r"p must be in \(0, 1\]"),
    (lambda z: decoding.top_p(z, 1.5), r"p must be in \(0, 1\]"),
    (lambda z: decoding.contrastive(z, z, 1.5), r"alpha must be in \[0, 1\]"),
    (lambda z: decoding.contrastive(z, z[:2], 0.1), "one shape"),
])
def test_processors_reject_bad_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call(torch.tensor([1.0, 2.0, 3.0]))


def test_empty_vocabulary_and_integer_logits_are_rejected():
    with pytest.raises(ValueError, match="non-empty vocabulary"):
        decoding.top_k(torch.zeros(3, 0), 1)
    with pytest.raises(TypeError, match="float tensor"):
        decoding.temperature(torch.tensor([1, 2]), 1.0)


# ---- samplers -----------------------------------------------------------------------------

SAMPLERS = {  # name: (processor, a slightly wrong processor)
    "plain": (lambda z: z, lambda z: decoding.temperature(z, 1.1)),
    "temperature": (lambda z: decoding.temperature(z, 0.7), lambda z: decoding.temperature(z, 0.8)),
    "top-k": (lambda z: decoding.top_k(z, 5), lambda z: decoding.top_k(z, 6)),
    "top-p": (lambda z: decoding.top_p(z, 0.8), lambda z: decoding.top_p(z, 0.9)),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_each_sampler_draws_from_its_defined_distribution(name):
    process, wrong = SAMPLERS[name]
    z = 1.5 * torch.randn(20, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    tokens = draws(z, process)
    assert chi_square(tokens, process(z).softmax(-1)) > 1e-3
    assert chi_square(tokens, wrong(z).softmax(-1)) < 1e-6  # the test has power


def test_ancestral_sampling_draws_whole_sequences_from_the_model():
    tree = decoding.TreeLM(3, 3, seed=0, scale=1.5)
    p = torch.zeros(27, dtype=torch.float64)
    for h in decoding.exhaustive_search(tree, START[0], 3):
        p[h.tokens[0] * 9 + h.tokens[1] * 3 + h.tokens[2]] = math.exp(h.logprob)
    check.close(p.sum(), torch.tensor(1.0, dtype=torch.float64))
    g = torch.Generator().manual_seed(0)
    seqs = decoding.sample(tree, torch.zeros(20000, 1, dtype=torch.long), 3, generator=g)[:, 1:]
    codes = seqs @ torch.tensor([9, 3, 1])
    assert chi_square(codes, p) > 1e-3
    assert chi_square(codes, p.roll(1)) < 1e-6


def test_sample_refuses_rows_without_any_allowed_token():
    step = constant(torch.full((4,), -math.inf))
    with pytest.raises(ValueError, match="nothing to sample"):
        decoding.sample(step, START, 1)


# ---- generate, greedy ---------------------------------------------------------------------

def test_greedy_fills_finished_rows_with_eos_and_stops_when_all_are_done():
    table = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [5.0, 0.0, 0.0]])

    def step(prefixes):  # 0 -> 1 -> 2 -> 0 ...
        return table[prefixes[:, -1]]

    out = decoding.greedy(step, torch.tensor([[0], [1]]), max_new=10, eos=2)
    assert out.tolist() == [[0, 1, 2], [1, 2, 2]]
    assert torch.equal(decoding.greedy(step, torch.tensor([[0]]), 0), torch.tensor([[0]]))
    assert decoding.greedy(step, torch.tensor([[0]]), 4).tolist() == [[0, 1, 2, 0, 1]]


@pytest.mark.parametrize("prompts, match", [
    (torch.zeros(2, 0, dtype=torch.long), r"\(b, t\) with b, t >= 1"),
    (torch.zeros(3, dtype=torch.long), r"\(b, t\) with b, t >= 1"),
])
def test_generate_rejects_bad_prompts(prompts, match):
    with pytest.raises(ValueError, match=match):
        decoding.greedy(constant(torch.zeros(3)), prompts, 2)
    with pytest.raises(TypeError, match="long tensor"):
        decoding.greedy(constant(torch.zeros(3)), torch.zeros(1, 1), 2)
    with pytest.raises(ValueError, match="max_new"):
        decoding.greedy(constant(torch.zeros(3)), START, -1)


# ---- beam search ---------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("eos", [None, 0])
def test_a_beam_as_wide_as_the_tree_equals_exhaustive_search(alpha, eos):
    for seed in range(15):
        tree = decoding.TreeLM(3, 4, seed=seed, scale=2.0)
        best = decoding.exhaustive_search(tree, START[0], 4, eos, alpha)[0]
        found = decoding.beam_search(tree, START[0], 3**4, 4, eos, alpha)[0]
        assert found.tokens == best.tokens
        assert math.isclose(found.logprob, best.logprob)
        assert math.isclose(found.score(alpha), best.score(alpha))


def test_beam_of_one_is_greedy_and_narrow_beams_can_miss():
    misses = 0
    for seed in range(30):
        tree = decoding.TreeLM(4, 4, seed=seed, scale=2.0)
        greedy = decoding.greedy(tree, START, 4, eos=0)[0, 1:].tolist()
        greedy = greedy[: greedy.index(0) + 1] if 0 in greedy else greedy
        assert decoding.beam_search(tree, START[0], 1, 4, eos=0)[0].tokens == greedy
        misses += greedy != decoding.exhaustive_search(tree, START[0], 4, 0)[0].tokens
    assert misses > 0  # greedy decoding is not exact on these trees


def test_exhaustive_search_lists_every_sequence_with_probabilities_summing_to_one():
    tree = decoding.TreeLM(3, 3, seed=2)
    for eos, n in ((None, 27), (0, 1 + 2 + 4 + 8)):
        hyps = decoding.exhaustive_search(tree, START[0], 3, eos)
        assert len(hyps) == n
        check.close(torch.tensor(sum(math.exp(h.logprob) for h in hyps)), torch.tensor(1.0),
                    atol=1e-9)
        assert [h.score() for h in hyps] == sorted((h.score() for h in hyps), reverse=True)
    with pytest.raises(ValueError, match="exceed the limit"):
        decoding.exhaustive_search(tree, START[0], 3, limit=10)


def test_hypothesis_scores_and_sequence_logprobs_agree_with_search():
    h = decoding.Hypothesis([1, 2, 3, 4], -8.0, True)
    assert h.score(0.0) == -8.0 and h.score(1.0) == -2.0 and h.score(0.5) == -4.0
    tree = decoding.TreeLM(3, 3, seed=4)
    for hyp in decoding.exhaustive_search(tree, START[0], 3)[:5]:
        ids = torch.tensor([[0, *hyp.tokens]])
        logp = decoding.sequence_logprobs(tree, ids, 1)
        check.shape(logp, "b t", b=1, t=3)
        assert math.isclose(logp.sum().item(), hyp.logprob)


def test_beam_search_rejects_bad_arguments():
    tree = decoding.TreeLM(3, 3)
    with pytest.raises(ValueError, match="beam_size"):
        decoding.beam_search(tree, START[0], 0, 3)
    with pytest.raises(ValueError, match="max_new"):
        decoding.beam_search(tree, START[0], 2, 0)
    with pytest.raises(ValueError, match="alpha"):
        decoding.beam_search(tree, START[0], 2, 3, alpha=-1.0)
    with pytest.raises(ValueError, match="at most 3 tokens"):
        tree(torch.zeros(1, 5, dtype=torch.long))


# ---- recurrent models ------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: gated.CharLSTM(7, 4, 8), lambda: rnn.CharRNN(7, 4, 8)])
def test_cached_recurrent_step_equals_recomputing_the_prefix(make):
    torch.manual_seed(0)
    model = make().eval()

    def full(prefixes):
        return model(prefixes)[0][:, -1]

    cached = decoding.RecurrentStep(model)
    ids = torch.randint(0, 7, (3, 9))
    check.close(decoding.sequence_logprobs(cached, ids, 2),
                decoding.sequence_logprobs(full, ids, 2), atol=1e-5)
    prompt = torch.tensor([1, 2])
    ours = decoding.beam_search(cached, prompt, 4, 6, eos=0)
    reference = decoding.beam_search(full, prompt, 4, 6, eos=0)
    assert [h.tokens for h in ours] == [h.tokens for h in reference]


def test_one_sequence_overfit_then_greedy_and_beam_reproduce_it():
    torch.manual_seed(0)
    target = torch.tensor([[5, 1, 4, 2, 6, 3, 0]])  # 0 is eos
    model = gated.CharLSTM(7, 8, 16)
    for _ in range(60):  # plain gradient descent on one sequence
        logits, _ = model(target[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits[0], target[0, 1:])
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 1.0 * p.grad
    model.eval()
    step = decoding.RecurrentStep(model)
    assert decoding.greedy(step, target[:, :1], 10, eos=0).tolist() == target.tolist()
    best = decoding.beam_search(step, target[0, :1], 3, 10, eos=0)[0]
    assert best.tokens == target[0, 1:].tolist() and best.finished


# ---- contrastive and constrained decoding -----------------------------------------------

def test_contrastive_scores_known_answers():
    strong, weak = torch.tensor([2.0, 1.5, 0.0, -3.0]), torch.tensor([3.0, 0.0, 0.0, -9.0])
    scores = decoding.contrastive(strong, weak, 0.1)
    log_s, log_w = strong.log_softmax(-1).double(), weak.log_softmax(-1).double()
    plausible = strong.softmax(-1) >= 0.1 * strong.softmax(-1).max()
    assert plausible.tolist() == [True, True, True, False]
    check.close(scores[plausible], (log_s - log_w)[plausible])
    assert scores[3] == -math.inf and scores.argmax() == 1
    assert (decoding.contrastive(strong, weak, 1.0) > -math.inf).tolist() == [
        True, False, False, False]  # alpha = 1: only the strong model's favourite
    assert (decoding.contrastive(strong, weak, 0.0) > -math.inf).all()
    same = decoding.contrastive(strong, strong, 0.1)  # a weak model equal to the strong one
    assert torch.equal(same[plausible], torch.zeros(3, dtype=torch.float64))


def test_contrastive_with_a_uniform_weak_model_is_greedy():
    tree = decoding.TreeLM(4, 5, seed=1, scale=2.0)
    uniform = constant(torch.zeros(4))
    cd = decoding.contrastive_step(tree, uniform, 0.1)
    assert torch.equal(decoding.greedy(cd, START, 5), decoding.greedy(tree, START, 5))


def test_constrain_masks_forbidden_tokens_and_rejects_bad_masks():
    step = constant(torch.zeros(4))
    even = decoding.constrain(step, lambda p: torch.tensor([True, False, True, False])
                              .expand(len(p), -1))
    assert (decoding.sample(even, torch.zeros(50, 1, dtype=torch.long), 5) % 2 == 0).all()
    with pytest.raises(ValueError, match="bool mask of shape"):
        decoding.constrain(step, lambda p: torch.ones(len(p), 3, dtype=torch.bool))(START)
    with pytest.raises(ValueError, match="allows no token"):
        decoding.constrain(step, lambda p: torch.zeros(len(p), 4, dtype=torch.bool))(START)


def test_regex_constraint_makes_every_output_match():
    pattern = r"(0[1-9]|1[0-2])/[0-9]{2}"  # a month and a year, MM/YY
    chars = [*"0123456789/", "</s>"]
    eos = len(chars) - 1
    g = torch.Generator().manual_seed(0)
    table = 2 * torch.randn(len(chars), len(chars), generator=g)

    def step(prefixes):
        return table[prefixes[:, -1]]

    allowed = decoding.regex_allowed(pattern, chars, eos, n_prompt=1)
    begin = torch.full((100, 1), eos)
    out = decoding.sample(decoding.constrain(step, allowed), begin, 8, eos, generator=g)
    texts = ["".join(chars[t] for t in row if t != eos) for row in out[:, 1:].tolist()]
    assert all(regex.fullmatch(pattern, t) for t in texts)
    assert len(set(texts)) > 10
    free = decoding.sample(step, begin, 8, eos, generator=g)
    assert not all(regex.fullmatch(pattern, "".join(chars[t] for t in row if t != eos))
                   for row in free[:, 1:].tolist())  # without the mask, outputs break it
    mask = allowed(torch.tensor([[eos, 1, 2, 10, 9, 9]]))  # "12/99": only eos may follow
    assert mask[0].tolist() == [False] * eos + [True]
    with pytest.raises(ValueError, match="eos must be a token id"):
        decoding.regex_allowed(pattern, chars, 99, 1)


# ---- metrics ------------------------------------------------------------------------------

def test_repetition_and_distinct_n_known_answers():
    assert decoding.repetition([1, 2, 3, 4, 5], 2) == 0.0
    assert decoding.repetition([1, 2, 1, 2, 1, 2], 2) == pytest.approx(0.6)
    assert decoding.repetition([7, 7, 7, 7, 7], 4) == pytest.approx(0.5)
    assert decoding.repetition([1, 2], 4) == 0.0
    assert decoding.distinct_n([[1, 2, 3], [1, 2, 4]], 2) == pytest.approx(0.75)
    assert decoding.distinct_n([[1, 1, 1, 1]], 1) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="no 2-gram"):
        decoding.distinct_n([[1], [2]], 2)
