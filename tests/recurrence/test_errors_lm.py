"""lecturelib.recurrence.lm refuses bad input with a message that names the argument, what was expected and
what was given (one row per wrong input)."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.recurrence import lm, word2vec

CHARS = lm.Vocab("hello")  # 4 symbols: l, e, h, o
WORDS = lm.Vocab(["the", "cat", "sat"])
IDS = torch.tensor([0, 1, 2, 3, 0, 1])
BIGRAM = lm.BigramLM(4).fit(IDS)
WINDOW = lm.WindowLM(vocab_size=5, context=2, d_embed=3, d_hidden=4)
SKIPGRAM = word2vec.SkipGram(5, 3)
COUNTS = torch.tensor([3, 2, 1, 1])
VECTORS = torch.randn(4, 3)
KN = lm.KneserNeyLM(4, 3).fit(IDS)
KEYS = torch.tensor([1, 5, 9])
W, C, NEG = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 4, 3)


def logits_of(shape):
    return lambda x: torch.zeros(shape)


Y = torch.zeros(2, 3, dtype=torch.long)

CASES = [
    # Vocab
    (lambda: lm.Vocab(5), TypeError, r"symbols must be a str or a list of str; got int 5"),
    (lambda: lm.Vocab([1, 2]), TypeError, r"symbols must be str \(characters or words\); got int"),
    (lambda: lm.Vocab(""), ValueError, r"cannot build a vocabulary from no symbols"),
    (lambda: lm.Vocab("ab", min_count=0), ValueError, r"min_count must be an int >= 1; got int 0"),
    (lambda: lm.Vocab("ab", min_count=1.5), ValueError, r"min_count must be an int >= 1"),
    (lambda: lm.Vocab("ab", unk=0), TypeError, r"unk must be a str or None; got int 0"),
    (lambda: CHARS.encode("z"), KeyError, r"'z' is not in the vocabulary"),
    (lambda: WORDS.encode("the cat"), TypeError,
     r"symbols must be a list of words for this word vocabulary; got a str"),
    (lambda: CHARS.decode([-1]), ValueError, r"ids must hold token ids in 0\.\.3; got ids from -1"),
    (lambda: CHARS.decode([-100]), ValueError, r"ids must hold token ids in 0\.\.3; got .*-100"),
    (lambda: CHARS.decode([4]), ValueError, r"ids must hold token ids in 0\.\.3; got .* to 4"),
    (lambda: CHARS.decode(torch.tensor([-1])), ValueError, r"ids must hold token ids in 0\.\.3"),
    (lambda: CHARS.decode([1.7]), TypeError, r"ids must be int token ids; got float 1.7"),
    (lambda: CHARS.decode(torch.tensor([1.7])), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: CHARS.decode([True]), TypeError, r"ids must be int token ids; got bool True"),
    (lambda: CHARS.decode("01"), TypeError, r"ids must be a 1-D tensor or a list of int ids; got str"),
    (lambda: CHARS.decode(torch.zeros(2, 2, dtype=torch.long)), ValueError,
     r"ids must be 1-D \(t,\) token ids; got shape \(2, 2\)"),
    # words
    (lambda: lm.words(["a", "b"]), TypeError, r"text must be a str; got list"),
    # split_ids
    (lambda: lm.split_ids(IDS.view(2, 3)), ValueError, r"ids must be 1-D \(t,\) token ids"),
    (lambda: lm.split_ids(IDS.float()), TypeError, r"ids must be an integer \(long\) tensor"),
    (lambda: lm.split_ids([1, 2, 3]), TypeError, r"ids must be an integer .*got list"),
    (lambda: lm.split_ids(IDS[:1]), ValueError, r"ids must hold at least 2 token id"),
    (lambda: lm.split_ids(IDS, 0.0), ValueError, r"val_fraction must be a finite number in \(0"),
    (lambda: lm.split_ids(IDS, math.nan), ValueError, r"val_fraction must be .*got float nan"),
    (lambda: lm.split_ids(IDS, 1), ValueError, r"val_fraction must be < 1"),
    # random_windows, context_windows
    (lambda: lm.random_windows(IDS, 0, 2), ValueError, r"batch_size must be an int >= 1; got int 0"),
    (lambda: lm.random_windows(IDS, 2, 0), ValueError, r"length must be an int >= 1; got int 0"),
    (lambda: lm.random_windows(IDS, 2, 8), ValueError, r"longer than a window \(8\)"),
    (lambda: lm.random_windows(IDS.float(), 2, 2), TypeError, r"ids must be an integer"),
    (lambda: lm.context_windows(IDS, 0), ValueError, r"context must be an int >= 1; got int 0"),
    (lambda: lm.context_windows(IDS, 2.0), ValueError, r"context must be an int >= 1; got float"),
    (lambda: lm.context_windows(IDS[:2], 2), ValueError, r"must be longer than the context"),
    (lambda: lm.context_windows(IDS.view(2, 3), 1), ValueError, r"ids must be 1-D"),
    # BigramLM
    (lambda: lm.BigramLM(0), ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: lm.BigramLM(4, k=-1), ValueError, r"smoothing constant k must be .*got int -1"),
    (lambda: lm.BigramLM(4, k=math.nan), ValueError, r"smoothing constant k .*got float nan"),
    (lambda: lm.BigramLM(4).fit(torch.tensor([0, 4])), ValueError,
     r"ids must hold token ids in 0\.\.3; got ids from 0 to 4"),
    (lambda: lm.BigramLM(4).fit(torch.tensor([0, -1])), ValueError, r"ids must hold token ids in 0"),
    (lambda: lm.BigramLM(4).fit(torch.tensor([0.0, 1.0])), TypeError, r"ids must be an integer"),
    (lambda: lm.BigramLM(4).fit(torch.tensor([1])), ValueError, r"ids must hold at least 2"),
    (lambda: BIGRAM.nll(torch.tensor([[0, 1]])), ValueError, r"ids must be 1-D"),
    (lambda: BIGRAM.nll(torch.tensor([0, 7])), ValueError, r"ids must hold token ids in 0\.\.3"),
    # KneserNeyLM, kneser_ney_counts, kneser_ney_prob, ngram_codes, lookup
    (lambda: lm.KneserNeyLM(0, 3), ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: lm.KneserNeyLM(4, 0), ValueError, r"order must be an int >= 1; got int 0"),
    (lambda: lm.KneserNeyLM(4, 2.0), ValueError, r"order must be an int >= 1; got float"),
    (lambda: lm.KneserNeyLM(4, 3, discount=0), ValueError,
     r"the discount D must be a finite number in \(0, 1\]; got int 0"),
    (lambda: lm.KneserNeyLM(4, 3, discount=1.5), ValueError, r"discount D .*got float 1.5"),
    (lambda: lm.KneserNeyLM(4, 3, discount=math.nan), ValueError, r"discount D .*got float nan"),
    (lambda: lm.KneserNeyLM(65, 11), ValueError,
     r"vocab_size\*\*order must be below 2\*\*62 .*got 65\*\*11"),
    (lambda: lm.KneserNeyLM(4, 3).fit(torch.tensor([0, 4, 1])), ValueError,
     r"ids must hold token ids in 0\.\.3; got ids from 0 to 4"),
    (lambda: lm.KneserNeyLM(4, 3).fit(torch.tensor([0, 1])), ValueError,
     r"ids must hold at least 3 token id"),
    (lambda: lm.KneserNeyLM(4, 3).fit(IDS.float()), TypeError, r"ids must be an integer"),
    (lambda: lm.KneserNeyLM(4, 3).probs(IDS), ValueError, r"no counts: call fit\(ids\) first"),
    (lambda: lm.KneserNeyLM(4, 3).nll(IDS), ValueError, r"no counts: call fit\(ids\) first"),
    (lambda: KN.probs(IDS.view(2, 3)), ValueError, r"context must be 1-D \(t,\) token ids"),
    (lambda: KN.probs(torch.tensor([4])), ValueError, r"context must hold token ids in 0\.\.3"),
    (lambda: KN.probs([0, 1]), TypeError, r"context must be an integer \(long\) tensor"),
    (lambda: KN.nll(IDS[:2]), ValueError, r"ids must hold at least 3 token id"),
    (lambda: lm.kneser_ney_counts(IDS, 3, 4, discount=-0.5), ValueError, r"discount D"),
    (lambda: lm.kneser_ney_prob(KN.levels[0], IDS.view(3, 2), 4), TypeError,
     r"levels must be a list of KneserNeyLevel \(kneser_ney_counts\); got KneserNeyLevel"),
    (lambda: lm.kneser_ney_prob([1], IDS.view(3, 2), 4), TypeError,
     r"each level must be a KneserNeyLevel; got int 1"),
    (lambda: lm.kneser_ney_prob(KN.levels, IDS.view(1, 6), 4), ValueError,
     r"grams must be rows \(context, next token\) of 1\.\.3 tokens.*got shape \(1, 6\)"),
    (lambda: lm.kneser_ney_prob(KN.levels, IDS, 4), ValueError, r"grams must be 2-D"),
    (lambda: lm.ngram_codes(IDS.view(2, 3).float(), 4), TypeError, r"grams must be an integer"),
    (lambda: lm.ngram_codes(IDS.view(2, 3), 3), ValueError, r"grams must hold token ids in 0\.\.2"),
    (lambda: lm.lookup(KEYS.float(), KEYS, KEYS), TypeError, r"keys must be a 1-D int64 tensor"),
    (lambda: lm.lookup(KEYS, KEYS, KEYS[None]), TypeError, r"queries must be a 1-D int64 tensor"),
    (lambda: lm.lookup(KEYS, KEYS[:2], KEYS), ValueError,
     r"values must be a tensor of the shape of keys, \(3,\); got torch.int64 tensor of shape"),
    # WindowLM
    (lambda: lm.WindowLM(5, 0, 3, 4), ValueError, r"context must be an int >= 1; got int 0"),
    (lambda: lm.WindowLM(0, 2, 3, 4), ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: lm.WindowLM(5, 2, 3, 0), ValueError, r"d_hidden must be an int >= 1; got int 0"),
    (lambda: WINDOW(torch.zeros(3, 4, dtype=torch.long)), ValueError,
     r"x must be \(batch, 2\) token ids; got \(3, 4\)"),
    (lambda: WINDOW(torch.zeros(3, 2)), TypeError, r"x must be an integer \(long\) tensor"),
    (lambda: WINDOW(torch.full((3, 2), -1)), ValueError, r"x must hold token ids in 0\.\.4"),
    (lambda: WINDOW(torch.full((3, 2), 5)), ValueError, r"x must hold token ids in 0\.\.4"),
    # next_token_loss
    (lambda: lm.next_token_loss(logits_of((2, 3, 5)), (Y,)), TypeError,
     r"batch must be a pair \(x, y\); got tuple of length 1"),
    (lambda: lm.next_token_loss(logits_of((2, 3, 5)), (Y, Y.float())), TypeError,
     r"batch's y must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: lm.next_token_loss(logits_of((2, 3, 5)), (Y, Y[0])), ValueError,
     r"batch's y must be 2-D \(b, t\) token ids; got shape \(3,\)"),
    (lambda: lm.next_token_loss(logits_of((6, 5)), (Y, Y)), ValueError,
     r"model\(x\) must return logits \(b, t, v\) = \(2, 3, v\) to match y; got shape \(6, 5\)"),
    (lambda: lm.next_token_loss(logits_of((3, 2, 5)), (Y, Y)), ValueError,
     r"model\(x\) must return logits .*got shape \(3, 2, 5\)"),
    # subsample, skipgram_pairs, noise_distribution
    (lambda: word2vec.subsample(IDS, COUNTS, t=0.0), ValueError, r"t must be a finite number in \(0"),
    (lambda: word2vec.subsample(IDS, COUNTS[:2]), ValueError, r"ids must hold token ids in 0\.\.1"),
    (lambda: word2vec.subsample(IDS, torch.zeros(4)), ValueError, r"counts must be finite, >= 0 and not"),
    (lambda: word2vec.subsample(IDS, COUNTS.view(2, 2)), TypeError, r"counts must be a 1-D tensor"),
    (lambda: word2vec.skipgram_pairs(IDS, 0), ValueError, r"window must be an int >= 1; got int 0"),
    (lambda: word2vec.skipgram_pairs(IDS.float(), 1), TypeError, r"ids must be an integer"),
    (lambda: word2vec.noise_distribution(-COUNTS), ValueError, r"counts must be finite, >= 0"),
    (lambda: word2vec.noise_distribution(COUNTS, math.nan), ValueError, r"power must be .*got float nan"),
    # sgns_loss, SkipGram
    (lambda: word2vec.sgns_loss(W, C, NEG[0]), ValueError, r"negatives must be \(b, k, d\); got shape"),
    (lambda: word2vec.sgns_loss(W, C[:1], NEG), ValueError,
     r"center \(b, d\), context \(b, d\) and negatives \(b, k, d\) must agree on b and d"),
    (lambda: word2vec.sgns_loss(W.long(), C, NEG), TypeError, r"center must be a float tensor \(b, d\)"),
    (lambda: word2vec.SkipGram(5, 0), ValueError, r"d_embed must be an int >= 1; got int 0"),
    (lambda: SKIPGRAM(torch.tensor([5]), torch.tensor([0]), torch.tensor([[1]])), ValueError,
     r"center must hold token ids in 0\.\.4; got ids from 5 to 5"),
    (lambda: SKIPGRAM(torch.tensor([0]), torch.tensor([-1]), torch.tensor([[1]])), ValueError,
     r"context must hold token ids in 0\.\.4"),
    (lambda: SKIPGRAM(torch.tensor([0]), torch.tensor([1]), torch.tensor([1])), ValueError,
     r"negatives must be 2-D \(b, t\) token ids"),
    # nearest, project_2d
    (lambda: word2vec.nearest(VECTORS, -1), ValueError, r"query must be an int in 0\.\.3; got int -1"),
    (lambda: word2vec.nearest(VECTORS, 4), ValueError, r"query must be an int in 0\.\.3; got int 4"),
    (lambda: word2vec.nearest(VECTORS, 0, k=4), ValueError, r"k must be an int in 1\.\.3; got int 4"),
    (lambda: word2vec.nearest(VECTORS[0], 0), ValueError, r"vectors must be \(v, d\); got shape \(3,\)"),
    (lambda: word2vec.project_2d(VECTORS[:, :1]), ValueError, r"n, d >= 2 .*got shape \(4, 1\)"),
    (lambda: word2vec.project_2d(VECTORS.long()), TypeError, r"vectors must be a float tensor"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
