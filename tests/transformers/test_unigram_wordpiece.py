"""lecturelib.transformers.wordpiece and lecturelib.transformers.unigram (chapter 9): WordPiece's greedy encoder against
``tokenizers.models.WordPiece``, Unigram's Viterbi against ``tokenizers.models.Unigram``,
forward-backward against enumeration, EM that never lowers the likelihood, and the two
WordPiece trainers against each other."""

from __future__ import annotations

import doctest
import math
import random
from collections import Counter

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

from lecturelib.transformers import unigram, wordpiece

TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, "
    "it was the age of foolishness, it was the epoch of belief, it was the epoch of "
    "incredulity.\nIt was the season of Light, it was the season of Darkness."
)


def segmentations(word: str, pieces) -> list[list[str]]:
    """Every way to cut ``word`` into ``pieces`` (the oracle of the dynamic programmes)."""
    if not word:
        return [[]]
    return [[word[:k], *rest] for k in range(1, len(word) + 1) if word[:k] in pieces
            for rest in segmentations(word[k:], pieces)]


def random_log_probs(rng: random.Random, alphabet: str, n: int) -> dict[str, float]:
    pieces = set(alphabet)
    while len(pieces) < n:
        pieces.add("".join(rng.choices(alphabet, k=rng.randint(2, 4))))
    weights = {p: rng.random() + 0.01 for p in sorted(pieces)}
    total = sum(weights.values())
    return {p: math.log(w / total) for p, w in weights.items()}


@pytest.mark.parametrize("module", [wordpiece, unigram], ids=lambda m: m.__name__)
def test_doctests(module):
    result = doctest.testmod(module, verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("seed", range(20))
def test_wordpiece_encode_equals_tokenizers(seed):
    rng = random.Random(seed)
    alphabet = "abcd"
    vocab = {wordpiece.UNK, *alphabet, *(wordpiece.CONTINUATION + c for c in alphabet[:3])}
    while len(vocab) < 30:
        piece = "".join(rng.choices(alphabet, k=rng.randint(2, 4)))
        vocab.add(wordpiece.CONTINUATION + piece if rng.random() < 0.5 else piece)
    ids = {p: i for i, p in enumerate(sorted(vocab))}
    max_chars = 8
    hf = HFTokenizer(models.WordPiece(ids, unk_token=wordpiece.UNK,
                                      max_input_chars_per_word=max_chars))
    words = ["".join(rng.choices(alphabet + "x", weights=[5, 5, 5, 5, 1],
                                 k=rng.randint(1, 10))) for _ in range(200)]
    ours = [p for w in words for p in wordpiece.wordpiece_encode(w, ids, max_chars)]
    assert ours == hf.encode(words, is_pretokenized=True).tokens
    assert wordpiece.wordpiece_encode("a" * 9, ids, max_chars) == [wordpiece.UNK]  # too long
    assert wordpiece.wordpiece_encode("x", ids, max_chars) == [wordpiece.UNK]  # not covered


def test_wordpiece_tokenizer_encodes_words_and_joins_continuations():
    tok = wordpiece.WordPiece([wordpiece.UNK, "it", "was", "##s", "w", "##a", ",", "the", "be", "##st"])
    assert tok.tokens("It was the best, it wasn't") == [
        wordpiece.UNK, "was", "the", "be", "##st", ",", "it", wordpiece.UNK, wordpiece.UNK, wordpiece.UNK]  # wasn ' t
    assert tok.decode(tok.encode("the best, it was")) == "the best , it was"
    assert tok.vocab_size == 10


def test_split_words_is_berts_pre_tokenizer():
    from tokenizers import pre_tokenizers

    text = TEXT + " Mr. O'Brien paid $3.50 -- (50%) naïve «café» 中文!"
    theirs = [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text)]
    assert wordpiece.split_words(text) == theirs


def fused_ids(word: str, log_probs: dict[str, float], unk_log_prob: float,
              ids: dict[str, int]) -> list[int]:
    """Our Viterbi as ``tokenizers`` reports it: a run of unknown characters is one
    ``<unk>`` (id 0)."""
    out = []
    for piece in unigram.viterbi(word, log_probs, unk_log_prob):
        i = ids.get(piece, 0)
        if not (i == 0 and out and out[-1] == 0):
            out.append(i)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_viterbi_equals_tokenizers_unigram(seed):
    rng = random.Random(seed)
    log_probs = random_log_probs(rng, "abcd", 25)
    vocab = [("<unk>", 0.0), *log_probs.items()]
    ids = {p: i for i, (p, _) in enumerate(vocab)}
    hf = HFTokenizer(models.Unigram(vocab, unk_id=0))
    unk = min(log_probs.values()) - 10  # tokenizers' penalty for an unknown character
    words = ["".join(rng.choices("abcdxy", weights=[5, 5, 5, 5, 1, 1],
                                 k=rng.randint(1, 12))) for _ in range(200)]
    ours = [i for w in words for i in fused_ids(w, log_probs, unk, ids)]
    assert ours == hf.encode(words, is_pretokenized=True).ids


@pytest.mark.parametrize("seed", range(10))
def test_viterbi_finds_the_most_probable_segmentation(seed):
    rng = random.Random(seed)
    log_probs = random_log_probs(rng, "ab", 8)
    for _ in range(20):
        word = "".join(rng.choices("ab", k=rng.randint(1, 8)))
        best = max(sum(log_probs[p] for p in seg)
                   for seg in segmentations(word, log_probs))
        cut = unigram.viterbi(word, log_probs, unk_log_prob=-100.0)
        assert "".join(cut) == word
        assert math.isclose(sum(log_probs[p] for p in cut), best)


@pytest.mark.parametrize("seed", range(10))
def test_forward_backward_sums_over_all_segmentations(seed):
    rng = random.Random(seed)
    log_probs = random_log_probs(rng, "ab", 10)
    word = "".join(rng.choices("ab", k=7))
    segs = segmentations(word, log_probs)
    probs = [math.exp(sum(log_probs[p] for p in s)) for s in segs]
    expected = Counter()
    for s, p in zip(segs, probs):
        for piece in s:
            expected[piece] += p / sum(probs)
    log_z, counts = unigram.forward_backward(word, log_probs)
    assert math.isclose(log_z, math.log(sum(probs)))
    assert set(counts) <= set(log_probs)
    for piece in log_probs:
        assert math.isclose(counts[piece], expected[piece], abs_tol=1e-12)


def test_em_never_lowers_the_likelihood_and_probabilities_sum_to_one():
    rng = random.Random(0)
    log_probs = random_log_probs(rng, "abc", 30)
    counts = Counter("".join(rng.choices("abc", k=rng.randint(1, 10))) for _ in range(300))
    words, freqs = list(counts), list(counts.values())
    history = []
    for _ in range(10):
        log_probs, log_likelihood = unigram.em_step(words, freqs, log_probs)
        history.append(log_likelihood)
        assert math.isclose(sum(math.exp(lp) for lp in log_probs.values()), 1.0)
    assert all(b >= a - 1e-9 for a, b in zip(history, history[1:]))
    assert history[-1] > history[0]


def test_prune_keeps_the_characters_and_the_pieces_that_matter():
    log_probs = {"a": math.log(0.2), "b": math.log(0.2), "ab": math.log(0.4),
                 "ba": math.log(0.19), "aba": math.log(0.01)}
    kept = unigram.prune(log_probs, 3)
    assert list(kept) == ["a", "b", "ab"]
    assert math.isclose(sum(math.exp(lp) for lp in kept.values()), 1.0)
    # relative probabilities are kept
    assert math.isclose(kept["ab"] - kept["a"], log_probs["ab"] - log_probs["a"])


def test_train_unigram():
    tok = unigram.train_unigram(TEXT * 3, 60)
    assert tok.vocab_size <= 60
    assert set(TEXT.replace(" ", unigram.SPACE)) <= set(tok.log_probs)  # characters stay
    assert math.isclose(sum(math.exp(lp) for lp in tok.log_probs.values()), 1.0)
    by_round: dict[int, list[float]] = {}
    for n, log_likelihood in tok.history:
        by_round.setdefault(n, []).append(log_likelihood)
    assert len(by_round) > 1
    for lls in by_round.values():  # EM within a round never lowers the likelihood
        assert all(b >= a - 1e-6 for a, b in zip(lls, lls[1:]))
    assert tok.decode(tok.tokens(TEXT)) == TEXT
    assert len(tok.tokens(TEXT)) < len(TEXT) / 2
    assert f"{unigram.SPACE}was" in tok.log_probs and f"{unigram.SPACE}the" in tok.log_probs


def test_unigram_encodes_unknown_characters_as_pieces_of_their_own():
    tok = unigram.Unigram({"a": math.log(0.5), "b": math.log(0.25), "ab": math.log(0.25)})
    assert tok.tokens("ab zab") == ["ab", unigram.SPACE, "z", "ab"]
    assert tok.unk_log_prob == math.log(0.25) - 10


def test_sentencepiece_words_restore_the_text():
    rng = random.Random(0)
    for _ in range(100):
        text = "".join(rng.choices("ab  \n\té中", k=rng.randint(0, 30)))
        words = unigram.sentencepiece_words(text)
        assert "".join(words).replace(unigram.SPACE, " ") == text
        assert all(unigram.SPACE not in w[1:] for w in words)  # ▁ only starts a word


def test_seed_pieces():
    counts = Counter(unigram.sentencepiece_words(TEXT))
    seed = unigram.seed_pieces(list(counts), list(counts.values()), 100)
    assert len(seed) == 100 and set(TEXT.replace(" ", unigram.SPACE)) <= set(seed)
    assert math.isclose(sum(math.exp(lp) for lp in seed.values()), 1.0)
    assert f"{unigram.SPACE}was" in seed  # frequent and long


def test_wordpiece_trainers_agree_and_know_the_textbook_example():
    text = "hug " * 10 + "pug " * 5 + "pun " * 12 + "bun " * 4 + "hugs " * 5
    alphabet = ["[UNK]", "##g", "##n", "##s", "##u", "b", "h", "p"]
    ratio = wordpiece.train_wordpiece_plain(text, 9)
    assert ratio.vocab == [*alphabet, "##gs"]  # rare apart, frequent together
    count = wordpiece.train_wordpiece_plain(text, 9, "count")
    assert count.vocab == [*alphabet, "##ug"]  # the most frequent pair, as BPE
    long_text = TEXT * 2 + " Mr. Lorry and Miss Manette, Jerry Cruncher."
    for score in ("ratio", "count"):
        for size in (40, 80, 150):
            assert (wordpiece.train_wordpiece(long_text, size, score).vocab
                    == wordpiece.train_wordpiece_plain(long_text, size, score).vocab)


def test_train_wordpiece_stops_when_no_pair_is_left():
    tok = wordpiece.train_wordpiece("ab ab", 100)
    assert tok.vocab == ["[UNK]", "##b", "a", "ab"]
    assert tok.tokens("ab a") == ["ab", "a"]
