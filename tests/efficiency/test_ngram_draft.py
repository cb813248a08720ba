"""lecturelib.efficiency.ngram_draft: the n-gram draft's probabilities are Witten–Bell
interpolation, checked by hand on a tiny text."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.efficiency import ngram_draft


def test_ngram_draft_is_witten_bell_interpolation_by_hand():
    ngram = ngram_draft.NGramDraft(torch.tensor([0, 1, 0, 1, 1]), order=2, vocab_size=3)
    # no context: counts 2, 3, 0 of 5 tokens, 2 distinct, interpolated with 1/3 each
    unigram = torch.tensor([2 + 2 / 3, 3 + 2 / 3, 2 / 3], dtype=torch.float64) / 7
    assert torch.allclose(ngram.probs([]), unigram)
    # after 0: 1 twice (2 counts, 1 distinct), interpolated with the unigram
    after_0 = (torch.tensor([0.0, 2.0, 0.0], dtype=torch.float64) + unigram) / 3
    assert torch.allclose(ngram.probs([1, 1, 0]), after_0)
    assert torch.allclose(ngram.probs([2]), unigram)          # unseen context: skipped
    assert torch.allclose(ngram.logits([0]).exp(), after_0)
    for ids in ([], [0], [1], [2], [0, 1]):
        assert math.isclose(ngram.probs(ids).sum().item(), 1.0)


def test_an_id_outside_the_vocabulary_would_collide_with_another_context():
    """Why probs refuses it: with v = 5, the context (0, 5) has the key of (1, 0)."""
    draft = ngram_draft.NGramDraft(torch.tensor([1, 0, 3, 1, 0, 3, 2, 4]), 3, 5)
    assert 0 * 5 + 5 == 1 * 5 + 0
    with pytest.raises(ValueError, match="ids must lie in 0..4"):
        draft.probs([0, 5])
    with pytest.raises(TypeError, match=r"pass ids.tolist\(\)"):
        draft.probs(torch.tensor([1, 0]))
    assert not torch.equal(draft.probs([1, 0]), draft.probs([]))  # a seen context
