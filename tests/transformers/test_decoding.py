"""lecturelib.transformers.decoding (chapter 10, search): generate and greedy decoding, beam search against
exhaustive search, the cached recurrent step against recomputation, and the repetition metrics."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib import check
from lecturelib.recurrence import lstm_gru, rnn
from lecturelib.transformers import decoding, degeneration

START = torch.zeros(1, 1, dtype=torch.long)


def constant(logits: torch.Tensor) -> decoding.Step:
    return lambda prefixes: logits.expand(len(prefixes), -1)


# ---- generate, greedy ---------------------------------------------------------------------

def test_greedy_fills_finished_rows_with_eos_and_stops_when_all_are_done():
    table = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [5.0, 0.0, 0.0]])

    def step(prefixes):  # 0 -> 1 -> 2 -> 0 ...
        return table[prefixes[:, -1]]

    out = decoding.greedy(step, torch.tensor([[0], [1]]), max_new=10, eos=2)
    assert out.tolist() == [[0, 1, 2], [1, 2, 2]]
    assert torch.equal(decoding.greedy(step, torch.tensor([[0]]), 0), torch.tensor([[0]]))
    assert decoding.greedy(step, torch.tensor([[0]]), 4).tolist() == [[0, 1, 2, 0, 1]]


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


# ---- recurrent models ------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: lstm_gru.CharLSTM(7, 4, 8), lambda: rnn.CharRNN(7, 4, 8)])
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
    model = lstm_gru.CharLSTM(7, 8, 16)
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


# ---- metrics ------------------------------------------------------------------------------

def test_repetition_and_distinct_n_known_answers():
    assert degeneration.repetition([1, 2, 3, 4, 5], 2) == 0.0
    assert degeneration.repetition([1, 2, 1, 2, 1, 2], 2) == pytest.approx(0.6)
    assert degeneration.repetition([7, 7, 7, 7, 7], 4) == pytest.approx(0.5)
    assert degeneration.repetition([1, 2], 4) == 0.0
    assert degeneration.distinct_n([[1, 2, 3], [1, 2, 4]], 2) == pytest.approx(0.75)
    assert degeneration.distinct_n([[1, 1, 1, 1]], 1) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="no 2-gram"):
        degeneration.distinct_n([[1], [2]], 2)
