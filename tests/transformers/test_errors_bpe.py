"""lecturelib.transformers.bpe refuses bad input with a message that names the argument, what was
expected and what was given (one row per wrong input)."""

from __future__ import annotations

import pytest

from lecturelib.transformers import bpe

TOK = bpe.train_bpe("aaabdaaabac", vocab_size=259)


class WordLevel:
    """A tokenizer whose vocabulary is not byte-level (words, not GPT-2's bytes)."""

    def __init__(self, extra=None):
        alphabet = {c: b for b, c in bpe.gpt2_byte_alphabet().items()}
        self.vocab = {"hello": 0, "world": 1} if extra is None else {**alphabet, **extra}

    def get_vocab(self):
        return self.vocab

CASES = [
    # pretokenize, word_counts
    (lambda: bpe.pretokenize(b"bytes"), TypeError, r"text must be a str; got bytes"),
    (lambda: bpe.pretokenize(["a", "b"]), TypeError, r"text must be a str; got list"),
    (lambda: bpe.pretokenize("ab", pattern=5), TypeError,
     r"pattern must be a str \(a regular expression\) or None; got int 5"),
    (lambda: bpe.pretokenize("ab", pattern="(a"), ValueError,
     r"pattern must be a valid regular expression; got '\(a'"),
    (lambda: bpe.word_counts(42), TypeError, r"text must be a str; got int"),
    # count_pairs, merge: text is not a list of ids
    (lambda: bpe.count_pairs("abab"), TypeError,
     r"words must be a list of lists of int ids .*not text; got str"),
    (lambda: bpe.count_pairs(["ab", "ab"]), TypeError, r"words must be .*not text; got list"),
    (lambda: bpe.count_pairs([[1, 2]], [1, 2]), ValueError,
     r"freqs must hold one count per word \(1\); got 2"),
    (lambda: bpe.merge("aab", ("a", "a"), 256), TypeError,
     r"ids must be a list of int ids and pair a tuple of two ids \(ints >= 0\); got str "
     r"'aab'"),
    (lambda: bpe.merge([97, 97], (97, 97, 97), 256), TypeError, r"pair a tuple of two ids"),
    (lambda: bpe.merge([97, 97], [97, 97], 256), TypeError, r"got list .* and list"),
    # Tokenizer
    (lambda: bpe.Tokenizer({(97, 97): 300}), ValueError, r"ids must be 256, 257, \.\.\. in order"),
    (lambda: bpe.Tokenizer({(97, 300): 256}), ValueError, r"each made of earlier tokens"),
    (lambda: bpe.Tokenizer({}, pattern="[a").encode("ab"), ValueError,
     r"pattern must be a valid regular expression; got '\[a'"),
    (lambda: TOK.encode(b"abc"), TypeError, r"text must be a str; got bytes"),
    (lambda: TOK.decode([-1]), ValueError, r"token ids must be ints in \[0, 259\); got \[-1\]"),
    (lambda: TOK.decode([-100, 97]), ValueError, r"token ids must be ints .*got \[-100\]"),
    (lambda: TOK.decode([259]), ValueError, r"token ids must be ints in \[0, 259\); got \[259\]"),
    (lambda: TOK.decode([97.0]), ValueError, r"token ids must be ints .*got \[97.0\]"),
    (lambda: TOK.decode("abc"), ValueError, r"token ids must be ints .*got \['a', 'b', 'c'\]"),
    (lambda: TOK.token_str(-1), ValueError, r"token ids must be ints in \[0, 259\); got \[-1\]"),
    (lambda: TOK.token_str(259), ValueError, r"token ids must be ints in \[0, 259\); got \[259\]"),
    (lambda: TOK.truncated(300), ValueError,
     r"vocab_size must be an int in 256\.\.259; got int 300"),
    (lambda: TOK.truncated(100), ValueError,
     r"vocab_size must be an int in 256\.\.259; got int 100"),
    # n_merges and the trainers
    (lambda: bpe.n_merges(255), ValueError,
     r"vocab_size must be an int >= 256; got int 255"),
    (lambda: bpe.n_merges(300.0), ValueError,
     r"vocab_size must be an int >= 256; got float 300\.0"),
    (lambda: bpe.n_merges(True), ValueError,
     r"vocab_size must be an int >= 256; got bool True"),
    (lambda: bpe.train_bpe("abc", 100), ValueError,
     r"vocab_size must be an int >= 256; got int 100"),
    (lambda: bpe.train_bpe(["abc"], 300), TypeError, r"text must be a str; got list"),
    (lambda: bpe.train_bpe_plain(b"abc", 300), TypeError, r"text must be a str; got bytes"),
    (lambda: bpe.train_bpe_plain("abc", "300"), ValueError,
     r"vocab_size must be an int >= 256; got str '300'"),
    (lambda: bpe.train_hf_bpe(["abc"], 300), TypeError, r"text must be a str; got list"),
    (lambda: bpe.train_hf_bpe("abc", 200), ValueError,
     r"vocab_size must be an int >= 256; got int 200"),
    # bytes_per_token, hf_vocab_bytes
    (lambda: bpe.bytes_per_token(TOK, ["abc"]), TypeError, r"text must be a str; got list"),
    (lambda: bpe.bytes_per_token("gpt2", "abc"), TypeError,
     r"tok must be a bpe.Tokenizer or a tokenizers.Tokenizer; got str 'gpt2'"),
    (lambda: bpe.hf_vocab_bytes(TOK), TypeError, r"hf_tok must be a tokenizers.Tokenizer"),
    (lambda: bpe.hf_vocab_bytes(WordLevel()), ValueError,
     r"hf_tok must be a byte-level BPE tokenizer \(ByteLevel pre-tokenizer, its 256 byte "
     r"tokens in GPT-2's alphabet\); its vocabulary of 2 lacks 256 of the byte tokens "
     r"and has 0 tokens outside that alphabet"),
    (lambda: bpe.hf_vocab_bytes(WordLevel({"[UNK] x": 256})), ValueError,
     r"lacks 0 of the byte tokens and has 1 tokens outside that alphabet \(e.g. "
     r"\['\[UNK\] x'\]\)"),
    # a merge of ids that are not token ids
    (lambda: bpe.Tokenizer({(-1, 97): 256}), ValueError,
     r"merge \(-1, 97\) -> 256: a merge maps a pair of token ids \(ints >= 0\) to a "
     r"new int id"),
    (lambda: bpe.Tokenizer({(97.0, 97): 256}), ValueError,
     r"merge \(97.0, 97\) -> 256: a merge maps a pair of token ids"),
    (lambda: bpe.Tokenizer({(97, 97): 256.0}), ValueError,
     r"merge \(97, 97\) -> 256.0: a merge maps a pair of token ids"),
    (lambda: bpe.Tokenizer([((97, 97), 256)]), TypeError,
     r"merges must be a dict \{\(a, b\): new_id\}; got list"),
    (lambda: bpe.merge([97, 97], (-1, 97), 256), TypeError,
     r"pair a tuple of two ids \(ints >= 0\); got list \[97, 97\] and tuple \(-1, 97\)"),
    (lambda: bpe.merge([97, 97], (97.0, 97), 256), TypeError,
     r"pair a tuple of two ids \(ints >= 0\)"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
