"""lecturelib.transformers.bpe.GPT4_PATTERN (chapter 9): GPT-4's pre-tokenizer
(cl100k_base), with chunks written out by hand where it differs from GPT-2's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib.transformers import bpe

# cl100k_base's pat_str as first published in tiktoken (tiktoken_ext/openai_public.py)
TIKTOKEN_CL100K = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def test_gpt4_pattern_is_tiktokens_cl100k_pattern():
    assert bpe.GPT4_PATTERN == TIKTOKEN_CL100K


def gpt2(text):
    return bpe.pretokenize(text, bpe.GPT2_PATTERN)


def gpt4(text):
    return bpe.pretokenize(text, bpe.GPT4_PATTERN)


# text, GPT-2's chunks, GPT-4's chunks: all written out by hand
DIFFERENCES = [
    # contractions in any case
    ("DON'T", ["DON", "'", "T"], ["DON", "'T"]),
    ("We'LL", ["We", "'", "LL"], ["We", "'LL"]),
    # at most three digits per chunk, and the space stays apart
    ("1234567", ["1234567"], ["123", "456", "7"]),
    (" 2024!", [" 2024", "!"], [" ", "202", "4", "!"]),
    # a letter run takes one preceding character that is not a letter or digit
    ("_name", ["_", "name"], ["_name"]),
    ("$x", ["$", "x"], ["$x"]),
    ("(self", ["(", "self"], ["(self"]),
    # newlines gather, apart from the spaces of the next line
    ("a\n\n  b", ["a", "\n\n ", " b"], ["a", "\n\n", " ", " b"]),
    ("x):\n    y", ["x", "):", "\n   ", " y"], ["x", "):\n", "   ", " y"]),
]


@pytest.mark.parametrize("text, chunks2, chunks4", DIFFERENCES)
def test_gpt2_and_gpt4_chunks_known_answers(text, chunks2, chunks4):
    assert gpt2(text) == chunks2
    assert gpt4(text) == chunks4


def test_gpt4_agrees_with_gpt2_on_plain_lower_case_prose():
    text = "it's the best of times, it was the worst of times"
    assert gpt4(text) == gpt2(text)


def test_a_tokenizer_trained_with_gpt4_pattern_keeps_it_and_round_trips():
    text = "def f(x):\n    return x + 1234567  # DON'T\n" * 20
    tok = bpe.train_bpe(text, 256 + 40, bpe.GPT4_PATTERN)
    assert tok.pattern == bpe.GPT4_PATTERN
    assert tok.decode(tok.encode(text)) == text
    assert all(sum(c.isdigit() for c in tok.decode([i])) <= 3
               for i in range(tok.vocab_size))


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_gpt4_chunks_cover_the_text(text):
    assert "".join(gpt4(text)) == text
