"""lecturelib.efficiency.ngram_draft: the n-gram draft's probabilities are Witten–Bell
interpolation, checked by hand on a tiny text."""

from __future__ import annotations

import math

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
