"""Bad input to lecturelib.posttraining.chat: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import chat, padded_cache
from lecturelib.pretraining import gpt


IDS = torch.tensor([[1, 5, 6, 2, 7, 3]])
MASK = torch.tensor([[False, False, False, False, True, True]])


def tiny():
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(
            vocab_size=len(chat.VOCAB), seq_len=16, d_model=16, n_layers=1, n_heads=2
        )
    )


def stepped(rows=None, new=1):
    """A PaddedDecoder after its prefill of rows 0 and 1 of three, called again with
    ``new`` more tokens for ``rows``."""
    ids = torch.tensor([[1, 5, 6, 2], [1, 7, 8, 2], [1, 9, 9, 2]])
    segments = torch.ones_like(ids)
    step = padded_cache.PaddedDecoder(tiny(), 8)
    step(ids, segments, torch.tensor([0, 1]))
    more = torch.cat([ids, torch.full((3, new), 5)], 1)
    return step(more, torch.ones_like(more), torch.tensor([0, 1]) if rows is None else rows)


EX = chat.chat("Add: 1 + 2", "3")
LOGITS = torch.zeros(1, 6, len(chat.VOCAB))


CASES = [
    # the KV cache of batched decoding
    (lambda: padded_cache.decoder("gpt", 8), TypeError, r"model must be a gpt\.GPT"),
    (lambda: padded_cache.decoder(tiny(), 0), ValueError, r"max_len"),
    (lambda: padded_cache.decoder(tiny(), 2.0), ValueError, r"max_len must be an int >= 1; got float"),
    (
        lambda: padded_cache.decoder(tiny(), 17),
        ValueError,
        r"max_len must be at most the model's seq_len = 16; got 17",
    ),
    # a decode step of the padded cache: rows it holds, one new token, CPU rows
    (lambda: stepped(rows=torch.tensor([0, 2])), ValueError,
     r"rows \[2\] are not in the cache, which holds rows \[0, 1\]: a decode step reads "
     r"only rows that the previous call read"),
    (lambda: stepped(rows=torch.tensor([1, 1])), ValueError,
     r"rows must be distinct row indices in 0..2; got \[1, 1\]"),
    (lambda: stepped(rows=torch.tensor([0, 3])), ValueError,
     r"rows must be distinct row indices in 0..2; got \[0, 3\]"),
    (lambda: stepped(rows=torch.tensor([-1])), ValueError,
     r"rows must be distinct row indices in 0..2; got \[-1\]"),
    (lambda: stepped(rows=torch.tensor([0.0])), TypeError,
     r"rows must be an integer tensor \(a,\); got torch.float32 tensor"),
    (lambda: stepped(rows=torch.tensor([[0]])), ValueError,
     r"rows must be a 1-D CPU tensor of one row index or more; got torch.int64 tensor "
     r"of shape \(1, 1\) on cpu"),
    (lambda: stepped(rows=torch.tensor([], dtype=torch.long)), ValueError,
     r"rows must be a 1-D CPU tensor of one row index or more"),
    (lambda: stepped(new=2), ValueError,
     r"each call after the first reads one new token: ids must have 5 positions; got 6"),
    (lambda: stepped(new=0), ValueError,
     r"each call after the first reads one new token: ids must have 5 positions; got 4"),
    (lambda: padded_cache.PaddedDecoder(tiny(), 8)(IDS.float(), IDS, torch.tensor([0])),
     TypeError, r"ids must be a 2-D integer tensor; got torch.float32 tensor"),
    (lambda: padded_cache.PaddedDecoder(tiny(), 8)(IDS, IDS[:, 1:], torch.tensor([0])),
     ValueError, r"segments \(1, 5\) must have the shape of ids \(1, 6\)"),
    (lambda: padded_cache.PaddedDecoder(tiny(), 8)(IDS, IDS, [0]), TypeError,
     r"rows must be an integer tensor \(a,\); got list \[0\]"),
    # vocabulary
    (lambda: chat.VOCAB.encode(3), TypeError, r"text must be str; got int 3"),
    (
        lambda: chat.VOCAB.encode("café"),
        ValueError,
        r"text holds 'é', which is not in the chat vocabulary \(newline and printable "
        r"ASCII\)",
    ),
    (
        lambda: chat.VOCAB.decode("abc"),
        TypeError,
        r"ids must be a 1-D tensor or a list of ids; got str 'abc'",
    ),
    (
        lambda: chat.VOCAB.decode([0, 100]),
        ValueError,
        r"ids must hold token ids in 0..99; got ids from 0 to 100",
    ),
    (
        lambda: chat.VOCAB.decode(torch.zeros(2, 2, dtype=torch.long)),
        ValueError,
        r"ids must be 1-D \(t,\) token ids; got shape \(2, 2\)",
    ),
    # template and batches
    (lambda: chat.chat(["hi"]), TypeError, r"prompt must be str; got list"),
    (lambda: chat.chat("hi", 3), TypeError, r"response must be a str or None; got int 3"),
    (
        lambda: chat.collate([]),
        ValueError,
        r"examples must hold at least one \(ids, mask\) pair; got none",
    ),
    (
        lambda: chat.collate(EX),
        TypeError,
        r"examples\[0\] must be an \(ids, mask\) pair; got torch.int64 tensor",
    ),
    (
        lambda: chat.collate([(EX[0], EX[1].long())]),
        TypeError,
        r"examples\[0\] mask must be a bool tensor; got torch.int64 tensor",
    ),
    (
        lambda: chat.collate([(EX[0], EX[1][:-1])]),
        ValueError,
        r"examples\[0\]: mask \(13,\) must match ids \(14,\)",
    ),
    (
        lambda: chat.collate([(EX[0].float(), EX[1])]),
        TypeError,
        r"examples\[0\] ids must be an integer \(long\) tensor of token ids",
    ),
    (lambda: chat.pack([EX], 0), ValueError, r"seq_len must be an int >= 1; got int 0"),
    (
        lambda: chat.pack([EX], 5),
        ValueError,
        r"an example of 14 tokens does not fit seq_len=5 \(13 inputs\)",
    ),
    (
        lambda: chat.shifted(IDS, MASK.long()),
        TypeError,
        r"mask must be a bool tensor \(b, t\); got torch.int64 tensor",
    ),
    (
        lambda: chat.shifted(IDS[:, :1], MASK[:, :1]),
        ValueError,
        r"ids must have t >= 2 positions; got shape \(1, 1\)",
    ),
    # losses and log-probabilities
    (
        lambda: chat.masked_loss(LOGITS.long(), IDS, MASK),
        TypeError,
        r"logits must be a float tensor \(b, t, v\); got torch.int64 tensor",
    ),
    (
        lambda: chat.masked_loss(LOGITS[0], IDS, MASK),
        ValueError,
        r"logits must be \(b, t, v\); got shape \(6, 100\)",
    ),
    (
        lambda: chat.masked_loss(LOGITS, IDS + 99, MASK),
        ValueError,
        r"targets must hold token ids in 0..99; got ids from 100 to 106",
    ),
    (
        lambda: chat.masked_loss(LOGITS, IDS, MASK.float()),
        TypeError,
        r"mask must be a bool tensor \(b, t\); got torch.float32 tensor",
    ),
    (
        lambda: chat.masked_loss(LOGITS, IDS[:, :5], MASK),
        ValueError,
        r"logits \(1, 6, 100\), targets \(1, 5\) and mask \(1, 6\) must share \(b, t\)",
    ),
    (
        lambda: chat.masked_loss(LOGITS, IDS, MASK & False),
        ValueError,
        r"mask marks no token: there is nothing to learn",
    ),
    (
        lambda: chat.response_logprobs(tiny(), IDS, MASK[:, :5]),
        ValueError,
        r"mask \(1, 5\) must match ids \(1, 6\)",
    ),
    (
        lambda: chat.response_logprobs(tiny(), IDS, ~MASK),
        ValueError,
        r"mask marks position 0, which no token precedes",
    ),
    (
        lambda: chat.response_logprobs(tiny(), IDS.float(), MASK),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids",
    ),
    (
        lambda: chat.response_logprobs("model", IDS, MASK),
        TypeError,
        r"model must be a gpt.GPT; got str",
    ),
    # decoding
    (
        lambda: chat.respond(torch.nn.Linear(2, 2), ["hi"]),
        TypeError,
        r"model must be a gpt.GPT; got Linear",
    ),
    (
        lambda: chat.respond(tiny(), "hi"),
        TypeError,
        r"prompts must be a non-empty list of str; got str 'hi'",
    ),
    (
        lambda: chat.respond(tiny(), []),
        TypeError,
        r"prompts must be a non-empty list of str; got list \[\]",
    ),
    (
        lambda: chat.respond(tiny(), ["hi"], max_new=0),
        ValueError,
        r"max_new must be an int >= 1; got int 0",
    ),
    (
        lambda: chat.respond(tiny(), ["hi"], temperature=-1.0),
        ValueError,
        r"temperature must be a finite number in \[0, inf\); got float -1.0",
    ),
    (
        lambda: chat.respond(tiny(), ["hi"], temperature=1.0),
        TypeError,
        r"generator must be a torch.Generator; got NoneType",
    ),
    (
        lambda: chat.respond(tiny(), ["hi"], stop="\n\n"),
        ValueError,
        r"stop must be one token \(a special token or a character\); got '\\n\\n'",
    ),
    (
        lambda: chat.respond(tiny(), ["hi", "a" * 20]),
        ValueError,
        r"prompts\[1\] is 22 tokens with its template, which leaves no room to answer "
        r"in the model's seq_len = 16",
    ),
    (  # exactly full: no room for one token
        lambda: chat.respond(tiny(), ["a" * 14]),
        ValueError,
        r"prompts\[0\] is 16 tokens with its template, which leaves no room",
    ),
    (
        lambda: chat.respond(tiny(), ["a" * 16], template=False),
        ValueError,
        r"prompts\[0\] is 16 tokens with its template, which leaves no room",
    ),
    (
        lambda: chat.group_sampler()(tiny(), ["a" * 14], 2),
        ValueError,
        r"prompts\[0\] is 16 tokens with its template, which leaves no room",
    ),
    (lambda: chat.logprobs(tiny(), ["a"], ["b", "c"]), ValueError,
     r"responses must be a list of one str per prompt \(1\); got list"),
    (lambda: chat.logprobs("gpt", ["a"], ["b"]), TypeError, r"model must be a gpt.GPT; got str"),
    (lambda: chat.group_sampler(max_new=0), ValueError, r"max_new must be an int >= 1"),
    (lambda: chat.group_sampler(temperature=0.0), ValueError,
     r"temperature must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: chat.group_sampler(seed=-1), ValueError, r"seed must be an int >= 0; got int -1"),
    # response log-probabilities: a row without a response, an empty batch
    (lambda: chat.response_logprobs(tiny(), IDS.repeat(2, 1),
                                    torch.cat([MASK, torch.zeros_like(MASK)])),
     ValueError, r"mask must mark one response token at least in each row; rows \[1\] "
                 r"mark none \(their log-probability would be 0, a certain response\)"),
    (lambda: chat.response_logprobs(tiny(), IDS[:0], MASK[:0]), ValueError,
     r"ids must hold at least 1 token id\(s\); got shape \(0, 6\)"),
    # wrong calls that answered silently or failed deep inside
    (lambda: chat.respond(tiny(), ["a"], template=1), TypeError,
     r"template must be a bool; got int 1"),
    (lambda: chat.respond(tiny(), ["a", ""], template=False), ValueError,
     r"prompts\[1\] is empty: a raw prompt \(template=False\) needs one token at least"),
    (lambda: chat.logprobs(tiny(), "ab", ["a", "b"]), TypeError,
     r"prompts must be a non-empty list of str; got str 'ab'"),
    (lambda: chat.group_sampler()(tiny(), "ab", 2), TypeError,
     r"prompts must be a non-empty list of str; got str 'ab'"),
    (lambda: chat.group_sampler()(tiny(), ["a"], 0), ValueError,
     r"group_size must be an int >= 1; got int 0"),
    (lambda: chat.group_sampler()("m", ["a"], 2), TypeError, r"model must be a gpt.GPT"),
    (lambda: chat.VOCAB.decode([1.5]), TypeError,
     r"ids must be a list of int token ids; got \[1.5\]"),
    (lambda: chat.VOCAB.encode("a", specials=1), TypeError,
     r"specials must be a bool; got int 1"),
    (lambda: chat.VOCAB.special("x"), ValueError, r"token must be one of \('<\|pad\|>'"),
    # ChatVocab: encode, special, decode
    (lambda: chat.ChatVocab().encode(3), TypeError, r"text must be str; got int 3"),
    (lambda: chat.ChatVocab().encode("hi", 1), TypeError, r"specials must be a bool; got int 1"),
    (lambda: chat.ChatVocab().encode("caf\u00e9"), ValueError,
     r"text holds '\u00e9', which is not in the chat vocabulary \(newline and printable "
     r"ASCII\)"),
    (lambda: chat.ChatVocab().special("<|system|>"), ValueError,
     r"token must be one of \('<\|pad\|>', '<\|user\|>', '<\|assistant\|>', '<\|end\|>'\); "
     r"got str '<\|system\|>'"),
    (lambda: chat.ChatVocab().special(0), ValueError, r"token must be one of .*got int 0"),
    (lambda: chat.ChatVocab().decode("abc"), TypeError,
     r"ids must be a 1-D tensor or a list of ids; got str 'abc'"),
    (lambda: chat.ChatVocab().decode([1.0]), TypeError,
     r"ids must be a list of int token ids; got \[1.0\]"),
    (lambda: chat.ChatVocab().decode([-1]), ValueError,
     r"ids must hold token ids in 0..99; got ids from -1 to -1"),
    (lambda: chat.ChatVocab().decode(torch.tensor([1000])), ValueError,
     r"ids must hold token ids in 0..99; got ids from 1000 to 1000"),
    (lambda: chat.ChatVocab().decode(torch.zeros(2, 2).long()), ValueError,
     r"ids must be 1-D \(t,\) token ids; got shape \(2, 2\)"),
    (lambda: chat.ChatVocab().decode(torch.zeros(2)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
