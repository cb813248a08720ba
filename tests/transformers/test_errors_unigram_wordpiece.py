"""lecturelib.transformers.wordpiece and lecturelib.transformers.unigram refuses bad input with a message that names the argument,
what was expected and what was given (one row per wrong input)."""

from __future__ import annotations

import math

import pytest

from lecturelib.transformers import unigram, wordpiece

WP = wordpiece.WordPiece([wordpiece.UNK, "a", "##b"])
LP = {"a": math.log(0.5), "b": math.log(0.25), "ab": math.log(0.25)}
UG = unigram.Unigram(LP)

CASES = [
    # split_words, sentencepiece_words
    (lambda: wordpiece.split_words(b"ab"), TypeError, r"text must be a str; got bytes"),
    (lambda: unigram.sentencepiece_words(["a b"]), TypeError, r"text must be a str; got list"),
    # wordpiece_encode
    (lambda: wordpiece.wordpiece_encode(b"ab", {"a"}), TypeError, r"word must be a str; got bytes"),
    (lambda: wordpiece.wordpiece_encode("ab", ["a", "##b"]), TypeError,
     r"vocab must be a set of str pieces; got list"),
    (lambda: wordpiece.wordpiece_encode("ab", "a##b"), TypeError,
     r"vocab must be a set of str pieces; got str"),
    (lambda: wordpiece.wordpiece_encode("ab", {"a"}, 0), ValueError,
     r"max_chars must be an int >= 1; got int 0"),
    (lambda: wordpiece.wordpiece_encode("ab", {"a"}, 2.0), ValueError,
     r"max_chars must be an int >= 1; got float 2.0"),
    # WordPiece
    (lambda: wordpiece.WordPiece("[UNK] a"), TypeError,
     r"vocab must be a list of str pieces; got str"),
    (lambda: wordpiece.WordPiece([wordpiece.UNK, 1]), TypeError, r"vocab must be a list of str pieces"),
    (lambda: wordpiece.WordPiece(["a", "##b"]), ValueError,
     r"vocab must hold '\[UNK\]' and no piece twice; got 2 pieces, 2 distinct, "
     r"'\[UNK\]' missing"),
    (lambda: wordpiece.WordPiece([wordpiece.UNK, "a", "a"]), ValueError,
     r"no piece twice; got 3 pieces, 2 distinct, '\[UNK\]' in"),
    (lambda: wordpiece.WordPiece([wordpiece.UNK], max_chars=0), ValueError,
     r"max_chars must be an int >= 1; got int 0"),
    (lambda: WP.tokens(b"ab"), TypeError, r"text must be a str; got bytes"),
    (lambda: WP.decode([3]), ValueError, r"ids must be token ids in 0\.\.2; got list \[3\]"),
    (lambda: WP.decode([-1]), ValueError, r"ids must be token ids in 0\.\.2"),
    (lambda: WP.decode([1.0]), ValueError, r"ids must be token ids in 0\.\.2"),
    # the WordPiece trainers
    (lambda: wordpiece.train_wordpiece(["ab"], 10), TypeError, r"text must be a str; got list"),
    (lambda: wordpiece.train_wordpiece("ab", 0), ValueError,
     r"vocab_size must be an int >= 1; got int 0"),
    (lambda: wordpiece.train_wordpiece("ab", 10, "pmi"), ValueError,
     r"score must be one of \('ratio', 'count'\); got str 'pmi'"),
    (lambda: wordpiece.train_wordpiece_plain("ab", "10"), ValueError,
     r"vocab_size must be an int >= 1; got str '10'"),
    (lambda: wordpiece.train_wordpiece_plain("ab", 10, None), ValueError,
     r"score must be one of \('ratio', 'count'\); got NoneType None"),
    # viterbi, forward_backward
    (lambda: unigram.viterbi(b"ab", LP, -20.0), TypeError, r"word must be a str; got bytes"),
    (lambda: unigram.viterbi("ab", [("a", -1.0)], -20.0), TypeError,
     r"log_probs must be a dict \{piece: log-probability\}; got list"),
    (lambda: unigram.viterbi("ab", LP, math.nan), ValueError,
     r"unk_log_prob must be a finite number in \[-inf, inf\); got float nan"),
    (lambda: unigram.viterbi("ab", LP, -math.inf), ValueError,
     r"unk_log_prob must be a finite number"),
    (lambda: unigram.forward_backward(["a", "b"], LP), TypeError, r"word must be a str; got list"),
    (lambda: unigram.forward_backward("ab", None), TypeError,
     r"log_probs must be a dict \{piece: log-probability\}; got NoneType None"),
    # em_step
    (lambda: unigram.em_step("ab", [1, 1], LP), TypeError, r"words must be a list of str; got str"),
    (lambda: unigram.em_step(["ab"], [1, 2], LP), ValueError,
     r"freqs must hold one count per word \(1\); got list \[1, 2\]"),
    (lambda: unigram.em_step(["ab"], [0], LP), ValueError, r"freqs must be counts > 0; got \[0\]"),
    (lambda: unigram.em_step(["ab", "c"], [1, 1], LP), ValueError,
     r"every character of the words must be a piece; missing \['c'\]"),
    (lambda: unigram.em_step(["ab"], [1], {}), TypeError,
     r"log_probs must be a non-empty dict \{piece: log-probability\}; got dict \{\}"),
    (lambda: unigram.em_step(["ab"], [1], {"a": 0.5, "b": -1.0}), ValueError,
     r"log_probs\['a'\] must be a finite number in \[-inf, 0\]; got float 0.5"),
    (lambda: unigram.em_step(["ab"], [1], {"a": -math.inf, "b": -1.0}), ValueError,
     r"log_probs\['a'\] must be a finite number"),
    (lambda: unigram.em_step(["ab"], [1], {"": -1.0}), TypeError,
     r"log_probs' pieces must be non-empty str; got ''"),
    # prune, seed_pieces
    (lambda: unigram.prune(LP, 1), ValueError, r"size must be an int >= 2; got int 1"),
    (lambda: unigram.prune(LP, 2.5), ValueError, r"size must be an int >= 2; got float 2.5"),
    (lambda: unigram.prune({}, 2), TypeError, r"log_probs must be a non-empty dict"),
    (lambda: unigram.seed_pieces(["ab"], [1], 0), ValueError, r"size must be an int >= 1; got int 0"),
    (lambda: unigram.seed_pieces(["ab"], [1], 5, max_len=0), ValueError,
     r"max_len must be an int >= 1; got int 0"),
    (lambda: unigram.seed_pieces("ab", [1, 1], 5), TypeError, r"words must be a list of str"),
    # Unigram
    (lambda: unigram.Unigram({}), TypeError, r"log_probs must be a non-empty dict"),
    (lambda: unigram.Unigram({"a": 1.0}), ValueError,
     r"log_probs\['a'\] must be a finite number in \[-inf, 0\]; got float 1.0"),
    (lambda: unigram.Unigram({1: -1.0}), TypeError, r"log_probs' pieces must be non-empty str; got 1"),
    (lambda: UG.tokens(b"ab"), TypeError, r"text must be a str; got bytes"),
    (lambda: UG.decode("ab"), TypeError, r"pieces must be a list of str; got str 'ab'"),
    (lambda: UG.decode([1, 2]), TypeError, r"pieces must be a list of str; got list"),
    # train_unigram
    (lambda: unigram.train_unigram(b"ab", 10), TypeError, r"text must be a str; got bytes"),
    (lambda: unigram.train_unigram("abc abc", 3), ValueError,
     r"vocab_size must be at least the 4 distinct characters of text \(every character "
     r"stays a piece\); got 3"),
    (lambda: unigram.train_unigram("ab", 0), ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: unigram.train_unigram("ab", 10, seed_size=5), ValueError,
     r"seed_size must be an int >= 10; got int 5"),
    (lambda: unigram.train_unigram("ab", 10, shrink=1.0), ValueError,
     r"shrink must be below 1 \(each round must drop pieces\); got 1.0"),
    (lambda: unigram.train_unigram("ab", 10, shrink=0.0), ValueError,
     r"shrink must be a finite number in \(0, 1\]; got float 0.0"),
    (lambda: unigram.train_unigram("ab", 10, n_em=0), ValueError,
     r"n_em must be an int >= 1; got int 0"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
