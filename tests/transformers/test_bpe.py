"""lecturelib.transformers.bpe (chapter 9): byte-level BPE, its two trainers, the GPT-2 pre-tokenizer."""

from __future__ import annotations

import doctest
import inspect
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib.recurrence import lm
from lecturelib.transformers import bpe

# A few KB of real English text with punctuation, digits and code: this package's own source.
TEXT = inspect.getsource(lm)[:8000]
LINES = r"[^\n]*\n|[^\n]+"  # chunks are whole lines: merges may cross words


@pytest.fixture(scope="module")
def tok():
    return bpe.train_bpe(TEXT, 256 + 200)


def letters(ids: list[int]) -> str:
    names = {256: "Z", 257: "Y", 258: "X"}
    return "".join(names.get(i, chr(i)) for i in ids)


def test_worked_example_known_answer():
    text = "aaabdaaabac"
    for train in (bpe.train_bpe, bpe.train_bpe_plain):
        tok = train(text, 259)
        assert tok.merges == {(97, 97): 256, (97, 98): 257, (256, 257): 258}  # Z, Y, X
        assert tok.counts == [4, 2, 2]
        steps = [letters(tok.truncated(v).encode(text)) for v in (256, 257, 258, 259)]
        assert steps == ["aaabdaaabac", "ZabdZabac", "ZYdZYac", "XdXac"]
        assert [tok.token_str(i) for i in (256, 257, 258)] == ["aa", "ab", "aaab"]


def test_merge_and_count_pairs_known_answers():
    assert bpe.merge([97, 97, 97], (97, 97), 256) == [256, 97]  # left to right
    assert bpe.merge([1, 2, 1, 2], (1, 2), 9) == [9, 9]
    assert bpe.merge([], (1, 2), 9) == []
    assert bpe.count_pairs([[1, 2, 3], [1, 2]], [5, 2]) == {(1, 2): 7, (2, 3): 5}
    assert bpe.word_counts("the cat the") == ([[116, 104, 101], [32, 99, 97, 116],
                                                    [32, 116, 104, 101]], [1, 1, 1])


@pytest.mark.parametrize("pattern", [bpe.GPT2_PATTERN, LINES])
def test_plain_and_fast_learn_identical_merges(pattern):
    fast = bpe.train_bpe(TEXT[:4000], 256 + 80, pattern)
    plain = bpe.train_bpe_plain(TEXT[:4000], 256 + 80, pattern)
    assert list(fast.merges.items()) == list(plain.merges.items())
    assert fast.counts == plain.counts


def test_plain_and_fast_agree_when_ties_abound():
    rng = random.Random(0)
    text = " ".join("".join(rng.choice("abc") for _ in range(rng.randint(1, 6)))
                    for _ in range(300))
    fast, plain = bpe.train_bpe(text, 2000), bpe.train_bpe_plain(text, 2000)
    assert list(fast.merges.items()) == list(plain.merges.items())
    assert fast.counts == plain.counts
    assert fast.vocab_size < 2000  # ran out of pairs: both stop early at the same point


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=60), st.integers(256, 300))
def test_plain_and_fast_agree_on_arbitrary_text(text, vocab_size):
    fast = bpe.train_bpe(text, vocab_size)
    plain = bpe.train_bpe_plain(text, vocab_size)
    assert list(fast.merges.items()) == list(plain.merges.items())


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_round_trip_on_arbitrary_unicode(tok, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode_bytes(ids) == text.encode("utf-8")
    assert all(0 <= i < tok.vocab_size for i in ids)


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=200), st.text())
def test_round_trip_after_training_on_arbitrary_unicode(corpus, text):
    tok = bpe.train_bpe(corpus, 256 + 30)
    for s in (corpus, text):
        assert tok.decode(tok.encode(s)) == s


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_chunks_cover_the_text(text):
    assert "".join(bpe.pretokenize(text)) == text


def test_gpt2_chunks_of_a_known_sentence():
    text = "Hello world, it's 2024!  I've got 3.5 apples:\n\tdon't you?"
    assert bpe.pretokenize(text) == [
        "Hello", " world", ",", " it", "'s", " 2024", "!", " ", " I", "'ve", " got", " 3",
        ".", "5", " apples", ":", "\n", "\t", "don", "'t", " you", "?"]
    assert bpe.pretokenize("naïve 中文", pattern=None) == ["naïve 中文"]
    assert bpe.pretokenize("") == []


def test_contraction_pattern_is_case_sensitive():
    assert bpe.pretokenize("he's") == ["he", "'s"]
    assert bpe.pretokenize("HE'S") == ["HE", "'", "S"]  # 'S is not a contraction
    assert bpe.pretokenize("we'LL") == ["we", "'", "LL"]


def test_no_merge_crosses_a_chunk_boundary(tok):
    chunks = {c.encode("utf-8") for c in bpe.pretokenize(TEXT)}
    for token in tok.vocab[256:]:
        assert any(token in c for c in chunks), token
    offsets, ends = 0, set()
    for i in tok.encode(TEXT):
        offsets += len(tok.vocab[i])
        ends.add(offsets)
    chunk_ends, n = set(), 0
    for c in bpe.pretokenize(TEXT):
        n += len(c.encode("utf-8"))
        chunk_ends.add(n)
    assert chunk_ends <= ends  # every chunk boundary is a token boundary


def test_without_pre_tokenization_merges_cross_words():
    tok = bpe.train_bpe(TEXT[:4000], 256 + 100, LINES)
    spanning = [t for t in tok.vocab[256:]
                if len(bpe.pretokenize(t.decode("utf-8", "replace"))) > 1]
    assert spanning  # e.g. b"s " or b"self.": the GPT-2 pattern would cut these apart


def test_invalid_utf8_is_replaced_or_raises():
    tok = bpe.Tokenizer({})
    ids = tok.encode("中")
    assert ids == [0xE4, 0xB8, 0xAD]
    assert tok.decode(ids[:2]) == "\ufffd"
    assert tok.decode(ids[:2] + ids) == "\ufffd中"
    with pytest.raises(UnicodeDecodeError):
        tok.decode(ids[:2], errors="strict")
    assert tok.token_str(0xE4) == "\\xe4"


def test_truncated_tokenizer_is_a_smaller_training_run(tok):
    small = bpe.train_bpe(TEXT, 256 + 50)
    assert tok.truncated(256 + 50) == small
    assert tok.truncated(256).merges == {}


def test_encoding_reproduces_the_training_segmentation(tok):
    chunks, freqs = bpe.word_counts(TEXT)
    words = chunks
    for pair, new_id in tok.merges.items():  # replay training, one merge at a time
        words = [bpe.merge(ids, pair, new_id) for ids in words]
    for chunk, ids in zip(chunks, words):
        assert tok.encode_chunk(bytes(chunk).decode("utf-8")) == ids
    n_tokens = sum(len(ids) * f for ids, f in zip(words, freqs))
    assert len(tok.encode(TEXT)) == n_tokens
    assert bpe.bytes_per_token(tok, TEXT) == len(TEXT.encode("utf-8")) / n_tokens


def test_hugging_face_trainer_learns_the_same_vocabulary(tok):
    hf = bpe.train_hf_bpe(TEXT, tok.vocab_size)
    theirs = bpe.hf_vocab_bytes(hf)
    assert len(theirs) == tok.vocab_size
    assert set(bpe.gpt2_byte_alphabet()) == set(range(256))
    assert len(set(bpe.gpt2_byte_alphabet().values())) == 256
    ours = set(tok.vocab)
    # only ties between equally frequent pairs are broken differently
    assert len(ours & set(theirs)) >= 0.9 * tok.vocab_size
    sample = "Merges, 2024 and naïve 中文!"
    assert hf.decode(hf.encode(sample).ids) == sample


def test_bad_input_raises_clear_errors(tok):
    with pytest.raises(ValueError, match="vocab_size must be an int >= 256"):
        bpe.train_bpe("abc", 255)
    with pytest.raises(ValueError, match="vocab_size must be an int >= 256"):
        bpe.train_bpe_plain("abc", 100)
    with pytest.raises(ValueError, match="vocab_size must be an int"):
        bpe.train_bpe("abc", 300.0)
    with pytest.raises(ValueError, match="vocab_size must be an int"):
        bpe.train_bpe("abc", True)
    with pytest.raises(TypeError, match="text must be a str"):
        bpe.train_bpe(b"abc", 300)
    with pytest.raises(ValueError, match=r"token ids must be ints in \[0, 456\)"):
        tok.decode([5, 456])
    with pytest.raises(ValueError, match=r"vocab_size must be an int in 256\.\.456"):
        tok.truncated(1000)
    with pytest.raises(ValueError, match="256, 257"):
        bpe.Tokenizer({(97, 97): 300})


def test_docstring_examples():
    assert doctest.testmod(bpe).failed == 0
