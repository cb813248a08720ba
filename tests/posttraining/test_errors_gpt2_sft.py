"""Bad input to lecturelib.posttraining.gpt2_sft: the error and its message."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from lecturelib.posttraining import gpt2_sft, weights
from lecturelib.pretraining import gpt

VOCAB = {"<|endoftext|>": 0, "a": 1, "b": 2}
TOK = Tokenizer(models.WordLevel(VOCAB, unk_token="a"))
WORDS = Tokenizer(models.WordLevel(VOCAB, unk_token="a"))
WORDS.pre_tokenizer = pre_tokenizers.Whitespace()  # one token per word
NO_EOS = Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
MODEL = gpt.GPT(weights.gpt2_config({"vocab_size": 3, "n_positions": 8, "n_embd": 8,
                                     "n_layer": 1, "n_head": 2}))

CASES = [
    (lambda: gpt2_sft.encode("tok", "a"), TypeError,
     r"tokenizer must be a tokenizers.Tokenizer \(with encode, decode and token_to_id\); "
     r"got str 'tok'"),
    (lambda: gpt2_sft.encode(NO_EOS, "a"), ValueError,
     r"the tokenizer has no <\|endoftext\|> token, which ends a response"),
    (lambda: gpt2_sft.encode(TOK, 3), TypeError, r"prompt must be str; got int 3"),
    (lambda: gpt2_sft.encode(TOK, "a", 3), TypeError,
     r"response must be a str or None; got int 3"),
    (lambda: gpt2_sft.finetune(torch.nn.Linear(2, 2), TOK, [("a", "b")], steps=1),
     TypeError, r"model must be a gpt.GPT; got Linear"),
    (lambda: gpt2_sft.finetune(MODEL, TOK, [], steps=1), TypeError,
     r"pairs must be a non-empty list of \(prompt, response\) str pairs; got list \[\]"),
    (lambda: gpt2_sft.finetune(MODEL, TOK, [("a", 1)], steps=1), TypeError,
     r"pairs must be a non-empty list of \(prompt, response\) str pairs"),
    (lambda: gpt2_sft.finetune(MODEL, TOK, [("a", "b")], steps=0), ValueError,
     r"steps must be an int >= 1; got int 0"),
    (lambda: gpt2_sft.finetune(MODEL, TOK, [("a", "b")], steps=1, lr=0.0), ValueError,
     r"lr must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: gpt2_sft.respond(MODEL, TOK, "a"), TypeError,
     r"prompts must be a non-empty list of str; got str 'a'"),
    (lambda: gpt2_sft.respond(MODEL, TOK, ["a"], max_new=0), ValueError,
     r"max_new must be an int >= 1; got int 0"),
    (lambda: gpt2_sft.respond(MODEL, TOK, ["a"], template="no"), TypeError,
     r"template must be a bool; got str 'no'"),
    (lambda: gpt2_sft.respond(MODEL, TOK, ["a", ""], template=False), ValueError,
     r"prompts\[1\] is empty: a plain continuation needs text to continue"),
    # the prompt fills the context (8 positions): refused, as chat.respond refuses it
    (lambda: gpt2_sft.respond(MODEL, WORDS, ["a", "a a a a"]), ValueError,
     r"prompts\[1\] is 8 tokens with its template, which leaves no room to answer in "
     r"the model's seq_len = 8"),
    # text_ids
    (lambda: gpt2_sft.text_ids("tok", "a"), TypeError,
     r"tokenizer must be a tokenizers.Tokenizer \(with encode, decode and token_to_id\); "
     r"got str 'tok'"),
    (lambda: gpt2_sft.text_ids(NO_EOS, "a"), ValueError,
     r"the tokenizer has no <\|endoftext\|> token, which ends a response"),
    (lambda: gpt2_sft.text_ids(TOK, 3), TypeError, r"text must be str; got int 3"),
    (lambda: gpt2_sft.text_ids(TOK, b"a"), TypeError, r"text must be str; got bytes"),
    (lambda: gpt2_sft.text_ids(TOK, "<|endoftext|>"), ValueError,
     r"the tokenizer read <\|endoftext\|> in the text '<\|endoftext\|>' as its special id"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
