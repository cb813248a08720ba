"""lecturelib.recurrence.lm (chapter 1): vocabularies, splits, the bigram and Kneser–Ney models, the window LM, SGNS."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib import check, train
from lecturelib.recurrence import lm, word2vec


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1))
def test_vocab_round_trip(text):
    vocab = lm.Vocab(text)
    assert vocab.decode(vocab.encode(text)) == text
    assert len(vocab) == len(set(text))


def test_vocab_orders_by_frequency_and_handles_unknowns():
    vocab = lm.Vocab("abbccc")
    assert vocab.itos == ["c", "b", "a"]
    with pytest.raises(KeyError, match="'z'"):
        vocab.encode("z")
    words = lm.Vocab(["a", "b", "b", "c", "c"], min_count=2, unk="<unk>")
    assert words.itos[0] == "<unk>" and "a" not in words.stoi
    assert words.decode(words.encode(["a", "b"]), sep=" ") == "<unk> b"


def test_words_keeps_contractions_and_punctuation():
    assert lm.words("Don't stop, 42 times!") == ["don't", "stop", ",", "42", "times", "!"]


def test_split_is_contiguous():
    ids = torch.arange(100)
    train_ids, val_ids = lm.split_ids(ids, 0.1)
    assert torch.equal(torch.cat([train_ids, val_ids]), ids) and len(val_ids) == 10
    with pytest.raises(ValueError, match="1-D"):
        lm.split_ids(ids.view(10, 10))
    with pytest.raises(ValueError, match="val_fraction"):
        lm.split_ids(ids, 1.5)


def test_random_windows_are_shifted_by_one():
    ids = torch.arange(50)
    x, y = lm.random_windows(ids, 4, 8, torch.Generator().manual_seed(0))
    check.shape(x, "b t", b=4, t=8)
    assert torch.equal(y, x + 1)  # in arange, the next token is the id plus one
    with pytest.raises(ValueError, match="longer than a window"):
        lm.random_windows(ids[:5], 2, 8)


def test_context_windows_known_answer():
    x, y = lm.context_windows(torch.tensor([5, 6, 7, 8]), context=2)
    assert x.tolist() == [[5, 6], [6, 7]] and y.tolist() == [7, 8]
    with pytest.raises(ValueError, match="context"):
        lm.context_windows(torch.tensor([1, 2]), context=0)


def test_bigram_known_answer_and_smoothing():
    ids = torch.tensor([0, 1, 0, 1, 0, 2])  # after 0: 1, 1, 2; after 1: 0, 0
    mle = lm.BigramLM(3, k=0.0).fit(ids)
    check.close(mle.probs[0], torch.tensor([0.0, 2 / 3, 1 / 3]))
    check.close(mle.probs[1], torch.tensor([1.0, 0.0, 0.0]))
    assert mle.probs[2].sum() == 0  # never seen as a context: no estimate
    assert math.isinf(mle.nll(torch.tensor([1, 1])))  # an unseen bigram
    add_one = lm.BigramLM(3, k=1.0).fit(ids)
    check.close(add_one.probs[0], torch.tensor([1 / 6, 3 / 6, 2 / 6]))
    check.close(add_one.probs.sum(1), torch.ones(3))
    test = torch.tensor([0, 1, 0, 2, 2])
    by_table = -add_one.probs[test[:-1], test[1:]].log().mean().item()
    assert add_one.nll(test) == pytest.approx(by_table)
    with pytest.raises(ValueError, match="k"):
        lm.BigramLM(3, k=-1)


def test_window_lm_is_a_linear_layer_on_concatenated_one_hot_vectors():
    """Chapter 1's claim: an embedding layer is a one-hot vector times a matrix, so the window
    LM is Bengio et al.'s network on concatenated one-hot inputs, and only the embedding rows
    of the tokens in the batch receive a gradient."""
    torch.manual_seed(0)
    model = lm.WindowLM(vocab_size=7, context=3, d_embed=4, d_hidden=5)
    x = torch.tensor([[1, 4, 4], [0, 6, 2]])
    one_hot = F.one_hot(x, 7).float()                                  # (b, context, v)
    e = (one_hot @ model.embed.weight).flatten(1)                      # (b, context·d)
    by_product = model.out(torch.tanh(model.hidden(e)))
    check.close(model(x), by_product)
    model(x).sum().backward()
    rows = model.embed.weight.grad.abs().sum(1).nonzero().flatten()
    assert rows.tolist() == [0, 1, 2, 4, 6]


def test_window_lm_shapes_and_errors():
    model = lm.WindowLM(vocab_size=11, context=3, d_embed=4, d_hidden=8)
    check.shape(model(torch.randint(0, 11, (5, 3))), "b v", b=5, v=11)
    with pytest.raises(ValueError, match=r"\(batch, 3\)"):
        model(torch.randint(0, 11, (5, 4)))


def test_next_token_loss_is_the_mean_cross_entropy_over_positions():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    y = torch.tensor([[0, 4, 2], [1, 1, 3]])
    by_hand = -torch.stack([logits[b, t].log_softmax(-1)[y[b, t]]
                            for b in range(2) for t in range(3)]).mean()
    check.close(lm.next_token_loss(lambda x: logits, (torch.zeros(2, 3), y)), by_hand)
    with pytest.raises(ValueError, match=r"model\(x\) must return logits \(b, t, v\)"):
        lm.next_token_loss(lambda x: logits[:, 0], (torch.zeros(2, 3), y))
    with pytest.raises(TypeError, match=r"y must be an integer \(long\) tensor"):
        lm.next_token_loss(lambda x: logits, (torch.zeros(2, 3), y.float()))


def test_neural_bigram_reaches_the_counted_maximum_likelihood():
    """A window-1 model is a reparametrised bigram: trained to convergence, its training NLL
    equals the maximum-likelihood (k = 0) bigram's."""
    torch.manual_seed(0)
    ids = torch.randint(0, 5, (400,))
    x, y = lm.context_windows(ids, 1)
    model = lm.WindowLM(5, 1, d_embed=8, d_hidden=32)
    train.fit(model, [(x, y)], lambda m, b: F.cross_entropy(m(b[0]), b[1]), steps=400, lr=0.03,
              progress=False)
    with torch.no_grad():
        nll = F.cross_entropy(model(x), y).item()
    assert nll == pytest.approx(lm.BigramLM(5, k=0.0).fit(ids).nll(ids), abs=0.01)


def test_window_lm_overfits_one_batch():
    torch.manual_seed(0)
    x, y = torch.randint(0, 20, (16, 4)), torch.randint(0, 20, (16,))
    model = lm.WindowLM(20, 4, 8, 64)
    hist = train.fit(model, [(x, y)], lambda m, b: F.cross_entropy(m(b[0]), b[1]), steps=200,
                     lr=1e-2, progress=False)
    assert hist.train_loss[-1] < 0.05


def test_sgns_loss_known_answers():
    w, c, negs = torch.randn(4, 5), torch.randn(4, 5), torch.randn(4, 3, 5)
    by_hand = -(torch.log(torch.sigmoid((w * c).sum(1)))
                + torch.log(torch.sigmoid(-(negs @ w[:, :, None]).squeeze(-1))).sum(1)).mean()
    check.close(word2vec.sgns_loss(w, c, negs), by_hand)
    zero = word2vec.sgns_loss(torch.zeros(2, 5), torch.zeros(2, 5), torch.zeros(2, 3, 5))
    assert zero.item() == pytest.approx(4 * math.log(2))


def test_skipgram_model_matches_loss_and_trains_sparse():
    torch.manual_seed(0)
    model = word2vec.SkipGram(10, 4, sparse=True)
    center, context = torch.tensor([1, 2]), torch.tensor([3, 4])
    negatives = torch.tensor([[5, 6], [7, 8]])
    expected = word2vec.sgns_loss(model.center(center), model.context(context), model.context(negatives))
    check.close(model(center, context, negatives), expected)
    opt = torch.optim.SparseAdam(list(model.parameters()), lr=0.1)
    hist = train.fit(model, [(center, context, negatives)], lambda m, b: m(*b), steps=50,
                     optimizer=opt, progress=False)
    assert hist.train_loss[-1] < 0.1 * hist.train_loss[0]
    with pytest.raises(ValueError, match="sparse"):
        train.fit(model, [(center, context, negatives)], lambda m, b: m(*b), steps=1,
                  optimizer=opt, clip=1.0, progress=False)


def test_skipgram_pairs_known_answer():
    pairs = word2vec.skipgram_pairs(torch.tensor([1, 2, 3]), window=1)
    assert sorted(map(tuple, pairs.tolist())) == [(1, 2), (2, 1), (2, 3), (3, 2)]
    assert len(word2vec.skipgram_pairs(torch.arange(10), window=3)) == 2 * (9 + 8 + 7)


def test_noise_distribution_and_its_samples():
    counts = torch.tensor([1000.0, 100.0, 10.0, 1.0])
    noise = word2vec.noise_distribution(counts)
    check.close(noise, counts ** 0.75 / (counts ** 0.75).sum())
    draws = torch.multinomial(noise, 200_000, replacement=True,
                              generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=4).float() / len(draws)
    assert (freq - noise).abs().max() < 0.005


def test_subsample_keeps_each_word_with_its_probability():
    counts = torch.tensor([9000, 1000])
    ids = torch.cat([torch.zeros(9000, dtype=torch.long), torch.ones(1000, dtype=torch.long)])
    kept = word2vec.subsample(ids, counts, t=0.01, generator=torch.Generator().manual_seed(0))
    kept_frac = torch.bincount(kept, minlength=2).float() / counts
    expected = torch.sqrt(0.01 / (counts.float() / counts.sum())).clamp(max=1)
    assert (kept_frac - expected).abs().max() < 0.03


def test_nearest_and_projection():
    vectors = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    assert [i for i, _ in word2vec.nearest(vectors, 0, k=3)] == [1, 2, 3]
    plane = torch.randn(20, 2) @ torch.randn(2, 6)  # points on a 2-D plane in 6-D
    xy = word2vec.project_2d(plane)
    check.close(torch.cdist(xy, xy), torch.cdist(plane, plane), atol=1e-4, rtol=1e-4)


def reference_kneser_ney(ids: list[int], order: int, vocab_size: int):
    """Interpolated Kneser–Ney written from Chen & Goodman's formulas with dictionaries:
    raw counts at the top order, continuation counts below, D = n1 / (n1 + 2 n2)."""
    from collections import Counter

    counts = {order: Counter(tuple(ids[i : i + order]) for i in range(len(ids) - order + 1))}
    for k in range(order - 1, 0, -1):  # N1+(. h w): distinct left extensions
        counts[k] = Counter(gram[1:] for gram in counts[k + 1])
    discount = {}
    for k, c in counts.items():
        n1 = sum(v == 1 for v in c.values())
        n2 = sum(v == 2 for v in c.values())
        discount[k] = n1 / (n1 + 2 * n2) if n1 else 0.5

    def prob(w: int, h: tuple) -> float:
        lower = prob(w, h[1:]) if h else 1 / vocab_size
        k = len(h) + 1
        following = {g: v for g, v in counts[k].items() if g[:-1] == h}
        total = sum(following.values())
        if total == 0:
            return lower
        d = discount[k]
        return (max(following.get(h + (w,), 0) - d, 0) + d * len(following) * lower) / total

    return prob


TINY = [0, 1, 2, 0, 3, 0, 4, 0, 1, 2, 0, 0, 1, 3]  # "abracadabra"-like; id 5 never seen


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_kneser_ney_equals_a_count_based_reference(order):
    model = lm.KneserNeyLM(6, order).fit(torch.tensor(TINY))
    reference = reference_kneser_ney(TINY, order, 6)
    contexts = [(), (0,), (5,), (0, 1), (1, 2), (5, 5), (2, 0, 1), (3, 3, 3), (0, 0, 1)]
    for h in contexts:
        h = h[len(h) - min(len(h), order - 1) :]  # the model reads the last order - 1
        expected = torch.tensor([reference(w, h) for w in range(6)], dtype=torch.float64)
        check.close(model.probs(torch.tensor(h, dtype=torch.long)), expected, atol=1e-12,
                    name=f"P(. | {h})")


def test_kneser_ney_sums_to_one_for_every_context():
    model = lm.KneserNeyLM(6, 3).fit(torch.tensor(TINY))
    for a in range(6):  # every context of two tokens, seen or not, and shorter ones
        for b in range(6):
            p = model.probs(torch.tensor([a, b]))
            assert (p > 0).all() and abs(p.sum().item() - 1) < 1e-12, (a, b)
    for h in ([], [5], [4, 2, 0, 1]):
        assert abs(model.probs(torch.tensor(h, dtype=torch.long)).sum().item() - 1) < 1e-12
    fixed = lm.KneserNeyLM(6, 4, discount=1.0).fit(torch.tensor(TINY))
    check.close(fixed.probs(torch.tensor([5, 0, 1])).sum(), torch.tensor(1.0).double())


def test_kneser_ney_nll_is_the_mean_over_its_contexts_and_discounts_are_estimated():
    ids = torch.tensor(TINY)
    model = lm.KneserNeyLM(6, 3).fit(ids)
    test = torch.tensor([0, 1, 2, 5, 0, 3, 3])
    by_probs = -sum(math.log(model.probs(test[t - 2 : t])[test[t]].item())
                    for t in range(2, len(test))) / (len(test) - 2)
    assert model.nll(test) == pytest.approx(by_probs, rel=1e-12)
    top = model.levels[-1]  # trigrams of TINY: 012 and 120 twice, 8 others once
    assert top.discount == pytest.approx(8 / (8 + 2 * 2))
    assert lm.KneserNeyLM(6, 3, discount=0.3).fit(ids).levels[0].discount == 0.3


def test_kneser_ney_beats_add_one_bigram_on_text():
    text = "the cat sat on the mat. the dog sat on the log. " * 20 + "the cat sat on the log."
    vocab = lm.Vocab(text)
    ids = vocab.encode(text)
    train_ids, val_ids = ids[:-60], ids[-60:]
    bigram = lm.BigramLM(len(vocab)).fit(train_ids).nll(val_ids[3:])
    kn = lm.KneserNeyLM(len(vocab), 4).fit(train_ids).nll(val_ids)
    assert kn < bigram / 2, (kn, bigram)


@pytest.mark.parametrize("order, discount", [(2, 0.1), (3, 0.6), (4, 0.1), (4, 1.0)])
def test_kneser_ney_equals_nltk_where_their_definitions_agree(order, discount):
    """nltk.lm.KneserNeyInterpolated with the same fixed discount, for every context. The two
    definitions agree when every token follows some other token (nltk's lowest order is the
    undiscounted continuation unigram, ours is discounted towards 1/V) and the first n-gram
    of the text occurs again later (nltk counts followers by raw counts, we by continuation
    counts): the text below is repeated to meet both."""
    nltk_lm = pytest.importorskip("nltk.lm")
    from nltk.util import everygrams

    ids = TINY[:-1] * 2  # every id 0..4 follows another; the first n-grams recur
    tokens = [str(i) for i in ids]
    ref = nltk_lm.KneserNeyInterpolated(order, discount=discount)
    ref.fit([list(everygrams(tokens, max_len=order))], vocabulary_text=tokens)
    ours = lm.KneserNeyLM(5, order, discount=discount).fit(torch.tensor(ids))
    for h in itertools.product(range(5), repeat=order - 1):
        expected = [ref.score(str(w), [str(u) for u in h]) for w in range(5)]
        check.close(ours.probs(torch.tensor(h, dtype=torch.long)),
                    torch.tensor(expected, dtype=torch.float64), atol=1e-12, name=str(h))
