"""lecturelib.recurrence.translation: tokens, length filter, seeded disjoint split, vocabularies, batches."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib.recurrence import translation as tr
from lecturelib.recurrence.translation import BOS_ID, EOS_ID, PAD_ID, UNK_ID

PAIRS = [
    ("Go.", "Va !"),
    ("I'm cold.", "J'ai froid."),
    ("Tom is here.", "Tom est là."),
    ("Tom is here.", "Tom est ici."),
    ("Are you OK?", "Ça va ?"),
    ("I love you, Tom.", "Je t'aime, Tom."),
    ("The cat is on the table.", "Le chat est sur la table."),
    ("We have to leave now, or we will miss the train.", "Nous devons partir maintenant."),
]


def tokenized(n_copies: int = 1):
    pairs = tr.tokenize_pairs(PAIRS)
    return [(s + [str(i)], t + [str(i)]) for i in range(n_copies) for s, t in pairs]


def test_tokenize_known_answers():
    assert tr.tokenize("Tu n'as pas l'air occupé !") == [
        "tu", "n'", "as", "pas", "l'", "air", "occupé", "!"]
    assert tr.tokenize("Hello,World. 3,5€") == ["hello", ",", "world", ".", "3", ",", "5", "€"]
    assert tr.tokenize("It’s") == ["it'", "s"]  # typographic apostrophe normalised
    assert tr.tokenize("  ") == []


def test_tokenize_rejects_non_strings():
    with pytest.raises(TypeError, match="text must be a str"):
        tr.tokenize(["already", "tokens"])


def test_detokenize_round_trip():
    for s in ["tu n'as pas l'air occupé.", "est-ce que tu as vu ?", "je t'aime, tom.", "ça va ?",
              "va !"]:
        assert tr.detokenize(tr.tokenize(s)) == s


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="abzéÇ09 '’.,!?-\n", max_size=30))
def test_tokens_survive_detokenize(text):
    tokens = tr.tokenize(text)
    assert tr.tokenize(tr.detokenize(tokens)) == tokens


def test_length_filter_holds():
    pairs = tokenized()
    kept = tr.filter_by_length(pairs, max_len=5, min_len=2)
    assert kept and len(kept) < len(pairs)
    assert all(2 <= len(s) <= 5 and 2 <= len(t) <= 5 for s, t in kept)
    dropped = [p for p in pairs if p not in kept]
    assert all(not (2 <= len(s) <= 5 and 2 <= len(t) <= 5) for s, t in dropped)
    with pytest.raises(ValueError, match="min_len <= max_len"):
        tr.filter_by_length(pairs, max_len=2, min_len=3)


def test_vocab_filter_keeps_only_common_words():
    pairs = [(["a", "b"], ["x"]), (["a"], ["y"]), (["c"], ["x"]), (["a"], ["x", "x"])]
    # counts: a 3, b 1, c 1 (ties keep first-seen order); x 3, y 1
    assert tr.filter_by_vocab(pairs, n_words=2) == [pairs[0], pairs[1], pairs[3]]
    assert tr.filter_by_vocab(pairs, n_words=1) == [pairs[3]]


def test_split_is_disjoint_complete_and_seeded():
    pairs = tokenized(n_copies=20)
    train, val, test = tr.split_pairs(pairs, n_val=10, n_test=15, seed=1)
    assert len(val) >= 10 and len(test) >= 15
    assert len(train) + len(val) + len(test) == len(pairs)
    sources = [{tuple(s) for s, _ in part} for part in (train, val, test)]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    assert tr.split_pairs(pairs, 10, 15, seed=1) == (train, val, test)
    assert tr.split_pairs(pairs, 10, 15, seed=2) != (train, val, test)
    small_train, _, _ = tr.split_pairs(pairs, 10, 15, seed=1, n_train=30)
    assert 30 <= len(small_train) <= 31 and all(p in train for p in small_train)


def test_split_keeps_translations_of_one_source_together():
    pairs = tokenized(n_copies=20)
    for part in tr.split_pairs(pairs, n_val=10, n_test=10, seed=0):
        for src, _ in part:
            if src[:3] == ["tom", "is", "here"]:  # two translations per source
                assert sum(s == src for s, _ in part) == 2


def test_split_too_small_raises():
    with pytest.raises(ValueError, match="too few"):
        tr.split_pairs(tokenized(), n_val=5, n_test=5)


def test_vocab_special_ids_and_min_count():
    sents = [["a", "b", "a"], ["a", "c"], ["b"]]
    vocab = tr.build_vocab(sents, min_count=2)
    assert vocab.itos[:4] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert [vocab.stoi[s] for s in tr.SPECIALS] == [PAD_ID, BOS_ID, EOS_ID, UNK_ID] == [0, 1, 2, 3]
    assert vocab.itos[4:] == ["a", "b"]  # "c" is seen once: below min_count
    assert vocab.encode(["c"]).tolist() == [UNK_ID]


def test_encode_decode_round_trip():
    vocab = tr.build_vocab([s for s, _ in tokenized()])
    tokens = tr.tokenize("Tom is on the table.")
    ids = tr.encode(tokens, vocab)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and len(ids) == len(tokens) + 2
    assert tr.decode(ids, vocab) == tokens
    assert tr.decode(ids.tolist() + [PAD_ID, 5], vocab) == tokens  # stops at </s>
    with pytest.raises(TypeError, match="list of tokens"):
        tr.encode("a string", vocab)


def test_batch_padding_and_shift():
    pairs = tokenized()[:4]
    src_vocab = tr.build_vocab([s for s, _ in pairs])
    tgt_vocab = tr.build_vocab([t for _, t in pairs])
    b = tr.make_batch(pairs, src_vocab, tgt_vocab)
    n_src = [len(s) + 2 for s, _ in pairs]
    n_tgt = [len(t) + 1 for _, t in pairs]
    assert b.src.shape == (4, max(n_src)) and b.tgt_in.shape == b.tgt_out.shape == (4, max(n_tgt))
    assert b.src_len.tolist() == n_src
    assert b.src_mask.sum(1).tolist() == n_src and b.tgt_mask.sum(1).tolist() == n_tgt
    assert (b.src[~b.src_mask] == PAD_ID).all() and (b.tgt_out[~b.tgt_mask] == PAD_ID).all()
    for i, (_, tgt) in enumerate(pairs):
        n = n_tgt[i]
        assert b.tgt_in[i, 0] == BOS_ID and b.tgt_out[i, n - 1] == EOS_ID
        assert torch.equal(b.tgt_in[i, 1:n], b.tgt_out[i, : n - 1])  # shifted by one
        assert tr.decode(b.tgt_out[i], tgt_vocab) == tgt
    with pytest.raises(ValueError, match="at least one"):
        tr.make_batch([], src_vocab, tgt_vocab)


def test_sampler_is_seeded_and_returns_batches_whose_lengths_stay_on_the_host():
    pairs = tokenized(3)
    d = tr.TranslationData(pairs, pairs[:2], pairs[2:4], tr.build_vocab([s for s, _ in pairs]),
                           tr.build_vocab([t for _, t in pairs]))
    a, b = d.sampler(5, seed=3)(0), d.sampler(5, seed=3)(0)
    assert isinstance(a, tr.Batch) and len(a) == 4 and a.host_fields == ("src_len",)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    batches = list(d.batches(pairs, 10))
    assert [len(x.src) for x in batches] == [10, 10, 4]


def test_load_runs_the_pipeline(monkeypatch):
    monkeypatch.setattr(tr.data, "fra_eng_pairs", lambda: PAIRS * 10)
    d = tr.load(max_len=6, n_words=None, n_val=2, n_test=2, min_count=1, seed=0)
    assert all(len(s) <= 6 and len(t) <= 6 for part in (d.train, d.val, d.test) for s, t in part)
    assert d.src_vocab.itos[:4] == list(tr.SPECIALS) and "tom" in d.tgt_vocab.stoi


def test_load_pauses_the_collector_only_while_it_builds(monkeypatch):
    import gc

    seen = []

    def pairs():
        seen.append(gc.isenabled())
        return PAIRS * 10

    monkeypatch.setattr(tr.data, "fra_eng_pairs", pairs)
    tr.load(max_len=6, n_words=None, n_val=2, n_test=2, min_count=1, seed=0)
    assert seen == [False] and gc.isenabled()
