"""lecturelib.metrics: perplexity, bits, accuracy and BLEU against known answers."""

from __future__ import annotations

import math

import pytest
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


def test_bits():
    assert metrics.nats_to_bits(math.log(2)) == pytest.approx(1.0)
    assert metrics.nats_to_bits(0) == 0.0


def test_accuracy_with_ignore_index():
    logits = torch.tensor([[[5.0, 0.0], [0.0, 5.0], [5.0, 0.0], [5.0, 0.0]]])  # predicts 0 1 0 0
    assert metrics.accuracy(logits, torch.tensor([[0, 1, 1, 1]])) == 0.5
    assert metrics.accuracy(logits, torch.tensor([[0, 1, -100, -100]])) == 1.0
    assert metrics.accuracy(logits, torch.tensor([[0, 0, 1, 7]]),
                            ignore_index=7) == pytest.approx(1 / 3)


def test_valid_edge_cases_still_score():
    """Integer targets of any width, -inf logits (a masked vocabulary) and NaN logits at
    ignored positions are all fine."""
    logits = torch.tensor([[[2.0, -math.inf, 0.0], [math.nan, math.nan, math.nan]]])
    targets = torch.tensor([[0, -100]], dtype=torch.int32)
    assert metrics.accuracy(logits, targets) == 1.0
    expected = F.cross_entropy(logits[0, :1], targets[0, :1].long()).item()
    assert metrics.mean_nll(logits, targets) == pytest.approx(expected)
    assert metrics.perplexity(math.inf) == math.inf


HYP = ["the cat sat on the mat .", "a dog barked loudly at the postman"]
REF = ["the cat sat on a mat .", "the dog barked at the postman"]


def test_bleu_of_identical_sentences_is_100():
    assert metrics.bleu(REF, REF) == pytest.approx(100.0)
    assert metrics.sentence_bleu(REF[0], REF[0]) == pytest.approx(100.0)


def test_bleu_without_a_shared_word_is_0():
    assert metrics.bleu(["a b c d"], ["e f g h"]) == 0.0
    assert metrics.sentence_bleu("a b c d", "e f g h") == 0.0


def test_bleu_known_answer_by_hand():
    """Hypothesis and reference share 5 of 6 words, 3 of 5 bigrams, 2 of 4 trigrams and 1 of 3
    4-grams; they have one length, so there is no brevity penalty:
    BLEU = 100 · (5/6 · 3/5 · 2/4 · 1/3)^(1/4) = 100 · (1/12)^(1/4)."""
    hyp, ref = "the cat sat on the mat", "the cat sat on a mat"
    expected = 100 * (1 / 12) ** 0.25
    assert metrics.bleu([hyp], [ref]) == pytest.approx(expected, rel=1e-12)
    assert metrics.sentence_bleu(hyp, ref) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(53.73, abs=0.01)


def test_bleu_brevity_penalty_by_hand():
    """Every n-gram of a 4-word prefix of a 6-word reference matches: only the brevity penalty
    exp(1 - r/c) = exp(1 - 6/4) is left."""
    score = metrics.bleu(["the cat sat on"], ["the cat sat on the mat"])
    assert score == pytest.approx(100 * math.exp(-0.5), rel=1e-12)


def test_bleu_smooths_zero_counts_by_hand():
    """No bigram matches: sacrebleu's default 'exp' smoothing replaces the k-th zero precision
    by 1 / (2^k · total), so
    BLEU = 100 · exp(1 - 6/4) · (4/4 · 1/(2·3) · 1/(4·2) · 1/(8·1))^(1/4)."""
    expected = 100 * math.exp(-0.5) * (1 / 6 * 1 / 8 * 1 / 8) ** 0.25
    assert metrics.sentence_bleu("cat the mat on", "the cat sat on a mat") == pytest.approx(
        expected, rel=1e-12)


def test_sentence_bleu_equals_sacrebleu_and_keeps_no_state_between_calls():
    """One scorer is reused across calls: every score equals sacrebleu.sentence_bleu's,
    whatever was scored before it (short and long, matching and not, in both orders)."""
    sacrebleu = pytest.importorskip("sacrebleu")
    pairs = list(zip(HYP, REF)) + [("cat the mat on", "the cat sat on a mat"),
                                   ("a", "a b c d e f g"), ("x y", "z")]
    for hyp, ref in pairs + pairs[::-1]:
        assert metrics.sentence_bleu(hyp, ref) == sacrebleu.sentence_bleu(hyp, [ref]).score


def test_corpus_bleu_pools_counts_over_sentences():
    """Counts are summed over the corpus before the precisions are taken: 7/8 unigrams, 4/6
    bigrams, 2/4 trigrams, 1/3 4-grams, 8 hypothesis words against 9 reference words."""
    hyps, refs = ["the cat sat on the mat", "a dog"], ["the cat sat on a mat", "a dog barked"]
    expected = 100 * math.exp(1 - 9 / 8) * (7 / 8 * 4 / 6 * 2 / 4 * 1 / 3) ** 0.25
    corpus = metrics.bleu(hyps, refs)
    assert corpus == pytest.approx(expected, rel=1e-12)
    mean = sum(metrics.sentence_bleu(h, r) for h, r in zip(hyps, refs)) / 2
    assert abs(corpus - mean) > 1  # not an average of sentence scores
    assert metrics.bleu(hyps[::-1], refs[::-1]) == pytest.approx(corpus)  # order does not matter


def test_bleu_tokenises_punctuation_and_is_case_sensitive():
    assert metrics.bleu(["the cat sat on the mat."], ["the cat sat on the mat ."]) == pytest.approx(
        100.0)
    assert metrics.bleu(["The cat sat on the mat"], ["the cat sat on the mat"]) < 100.0


def test_bleu_properties():
    """Between 0 and 100, and a wrong word replacing a right one lowers it."""
    score = metrics.bleu(HYP, REF)
    assert 0 < score < 100
    worse = [HYP[0].replace("cat", "hat"), HYP[1]]
    assert metrics.bleu(worse, REF) < score
    assert 0 <= metrics.sentence_bleu(HYP[1], REF[1]) < 100


def test_perplexity_of_a_huge_loss_is_inf_not_an_overflow():
    assert metrics.perplexity(1e6) == float("inf")
    assert metrics.perplexity(float("inf")) == float("inf")
