"""lecturelib.metrics: perplexity, bits, accuracy and BLEU against known answers."""

from __future__ import annotations

import math

import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from lecturelib import metrics


@pytest.mark.parametrize("vocab_size", [2, 7, 65])
def test_uniform_model_has_perplexity_vocab_size(vocab_size):
    logits = torch.zeros(3, 5, vocab_size)
    targets = torch.randint(0, vocab_size, (3, 5), generator=torch.Generator().manual_seed(0))
    nll = metrics.mean_nll(logits, targets)
    assert nll == pytest.approx(math.log(vocab_size))
    assert metrics.perplexity(nll) == pytest.approx(vocab_size)
    assert metrics.nats_to_bits(nll) == pytest.approx(math.log2(vocab_size))


def test_mean_nll_matches_cross_entropy_and_skips_ignored():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 6, 5, generator=g)
    targets = torch.randint(0, 5, (4, 6), generator=g)
    targets[:, :2] = -100
    expected = F.cross_entropy(logits[:, 2:].reshape(-1, 5), targets[:, 2:].reshape(-1))
    assert metrics.mean_nll(logits, targets) == pytest.approx(expected.item(), rel=1e-6)


def test_perfect_model_has_perplexity_one():
    assert metrics.perplexity(0.0) == 1.0
    assert metrics.perplexity(torch.tensor(math.log(3.0))) == pytest.approx(3.0)


def test_perplexity_rejects_nonsense():
    for bad in (-0.1, math.nan):
        with pytest.raises(ValueError):
            metrics.perplexity(bad)


def test_bits():
    assert metrics.nats_to_bits(math.log(2)) == pytest.approx(1.0)
    assert metrics.nats_to_bits(0) == 0.0


def test_accuracy_with_ignore_index():
    logits = torch.tensor([[[5.0, 0.0], [0.0, 5.0], [5.0, 0.0], [5.0, 0.0]]])  # predicts 0 1 0 0
    assert metrics.accuracy(logits, torch.tensor([[0, 1, 1, 1]])) == 0.5
    assert metrics.accuracy(logits, torch.tensor([[0, 1, -100, -100]])) == 1.0
    assert metrics.accuracy(logits, torch.tensor([[0, 0, 1, 7]]), ignore_index=7) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="nothing to score"):
        metrics.accuracy(logits, torch.full((1, 4), -100))


def test_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3, 4\) and \(2, 4\)"):
        metrics.accuracy(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError):
        metrics.mean_nll(torch.zeros(2, 3, 4), torch.zeros(3, 2, dtype=torch.long))


HYP = ["the cat sat on the mat .", "a dog barked loudly at the postman"]
REF = ["the cat sat on a mat .", "the dog barked at the postman"]


def test_bleu_is_sacrebleu():
    ours = metrics.bleu(HYP, REF)
    assert ours == sacrebleu.corpus_bleu(HYP, [REF]).score
    assert 0 < ours < 100


def test_bleu_of_identical_sentences_is_100():
    assert metrics.bleu(REF, REF) == pytest.approx(100.0)
    assert metrics.sentence_bleu(REF[0], REF[0]) == pytest.approx(100.0)


def test_sentence_bleu_is_sacrebleu():
    assert metrics.sentence_bleu(HYP[1], REF[1]) == sacrebleu.sentence_bleu(HYP[1], [REF[1]]).score


def test_bleu_arguments():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        metrics.bleu(HYP, REF[:1])
    with pytest.raises(ValueError):
        metrics.bleu([], [])
    with pytest.raises(TypeError):
        metrics.bleu(HYP[0], REF[0])
