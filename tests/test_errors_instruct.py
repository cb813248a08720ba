"""Bad input to lecturelib.posttraining.instruct: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import instruct as I
from lecturelib.pretraining import gpt

IDS = torch.tensor([[1, 5, 6, 2, 7, 3]])
MASK = torch.tensor([[False, False, False, False, True, True]])


def tiny():
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(
            vocab_size=len(I.VOCAB), seq_len=16, d_model=16, n_layers=1, n_heads=2
        )
    )


EX = I.chat("Add: 1 + 2", "3")
LOGITS = torch.zeros(1, 6, len(I.VOCAB))

CASES = [
    # vocabulary
    (lambda: I.VOCAB.encode(3), TypeError, r"text must be str; got int 3"),
    (
        lambda: I.VOCAB.encode("café"),
        ValueError,
        r"text holds 'é', which is not in the chat vocabulary \(newline and printable "
        r"ASCII\)",
    ),
    (
        lambda: I.VOCAB.decode("abc"),
        TypeError,
        r"ids must be a 1-D tensor or a list of ids; got str 'abc'",
    ),
    (
        lambda: I.VOCAB.decode([0, 100]),
        ValueError,
        r"ids must hold token ids in 0..99; got ids from 0 to 100",
    ),
    (
        lambda: I.VOCAB.decode(torch.zeros(2, 2, dtype=torch.long)),
        ValueError,
        r"ids must be 1-D \(t,\) token ids; got shape \(2, 2\)",
    ),
    # tasks
    (
        lambda: I.problems("multiply", 3),
        ValueError,
        r"kind must be one of \('reverse', 'sort', 'date', 'add'\); got str 'multiply'",
    ),
    (lambda: I.problems("add", 0), ValueError, r"n must be an int >= 1; got int 0"),
    (
        lambda: I.problems("add", 2, seed=-1),
        ValueError,
        r"seed must be an int in 0..4611686018427387904; got int -1",
    ),
    (
        lambda: I.problems("add", 2, held_out=1),
        TypeError,
        r"held_out must be a bool; got int 1",
    ),
    (
        lambda: I.operands("sort", 2.0),
        ValueError,
        r"n must be an int >= 1; got float 2.0",
    ),
    (
        lambda: I.solve("add", b"What is 1 + 2?"),
        TypeError,
        r"prompt must be str; got bytes",
    ),
    (
        lambda: I.solve("add", "What is one plus two?"),
        ValueError,
        r"not an addition 'a \+ b': 'one plus two'",
    ),
    (
        lambda: I.solve("add", "Tell me 1 + 2"),
        ValueError,
        r"prompt is not an instruction of kind 'add' in PHRASINGS: 'Tell me 1 \+ 2'",
    ),
    (
        lambda: I.solve("date", "ISO date: 31 February 1999"),
        ValueError,
        r"not a date in one of the task's formats: '31 February 1999'",
    ),
    (
        lambda: I.solve("date", "ISO date: Monday, March 3, 1998"),
        ValueError,
        r"not a date in one of the task's formats: 'Monday, March 3, 1998'",
    ),
    (
        lambda: I.is_correct("add", "What is 1 + 2?", 3),
        TypeError,
        r"response must be str; got int 3",
    ),
    (
        lambda: I.is_correct("sum", "What is 1 + 2?", "3"),
        ValueError,
        r"kind must be one of .*got str 'sum'",
    ),
    (lambda: I.follows_format(None), TypeError, r"response must be str; got NoneType"),
    (
        lambda: I.demonstrations("rotate", 2),
        ValueError,
        r"rule must be one of \('copy', 'reverse', 'alphabetise', 'double', 'reverse', "
        r"'sort', 'date', 'add'\); got str 'rotate'",
    ),
    (
        lambda: I.few_shot("copy", -1, 2),
        ValueError,
        r"shots must be an int >= 0; got int -1",
    ),
    (lambda: I.few_shot("copy", 1, 0), ValueError, r"n must be an int >= 1; got int 0"),
    (lambda: I.corpus(0), ValueError, r"n_chars must be an int >= 1; got int 0"),
    # template and batches
    (lambda: I.chat(["hi"]), TypeError, r"prompt must be str; got list"),
    (lambda: I.chat("hi", 3), TypeError, r"response must be a str or None; got int 3"),
    (
        lambda: I.collate([]),
        ValueError,
        r"examples must hold at least one \(ids, mask\) pair; got none",
    ),
    (
        lambda: I.collate(EX),
        TypeError,
        r"examples\[0\] must be an \(ids, mask\) pair; got torch.int64 tensor",
    ),
    (
        lambda: I.collate([(EX[0], EX[1].long())]),
        TypeError,
        r"examples\[0\] mask must be a bool tensor; got torch.int64 tensor",
    ),
    (
        lambda: I.collate([(EX[0], EX[1][:-1])]),
        ValueError,
        r"examples\[0\]: mask \(13,\) must match ids \(14,\)",
    ),
    (
        lambda: I.collate([(EX[0].float(), EX[1])]),
        TypeError,
        r"examples\[0\] ids must be an integer \(long\) tensor of token ids",
    ),
    (lambda: I.pack([EX], 0), ValueError, r"seq_len must be an int >= 1; got int 0"),
    (
        lambda: I.pack([EX], 5),
        ValueError,
        r"an example of 14 tokens does not fit seq_len=5 \(13 inputs\)",
    ),
    (
        lambda: I.shifted(IDS, MASK.long()),
        TypeError,
        r"mask must be a bool tensor \(b, t\); got torch.int64 tensor",
    ),
    (
        lambda: I.shifted(IDS[:, :1], MASK[:, :1]),
        ValueError,
        r"ids must have t >= 2 positions; got shape \(1, 1\)",
    ),
    # losses and log-probabilities
    (
        lambda: I.masked_loss(LOGITS.long(), IDS, MASK),
        TypeError,
        r"logits must be a float tensor \(b, t, v\); got torch.int64 tensor",
    ),
    (
        lambda: I.masked_loss(LOGITS[0], IDS, MASK),
        ValueError,
        r"logits must be \(b, t, v\); got shape \(6, 100\)",
    ),
    (
        lambda: I.masked_loss(LOGITS, IDS + 99, MASK),
        ValueError,
        r"targets must hold token ids in 0..99; got ids from 100 to 106",
    ),
    (
        lambda: I.masked_loss(LOGITS, IDS, MASK.float()),
        TypeError,
        r"mask must be a bool tensor \(b, t\); got torch.float32 tensor",
    ),
    (
        lambda: I.masked_loss(LOGITS, IDS[:, :5], MASK),
        ValueError,
        r"logits \(1, 6, 100\), targets \(1, 5\) and mask \(1, 6\) must share \(b, t\)",
    ),
    (
        lambda: I.masked_loss(LOGITS, IDS, MASK & False),
        ValueError,
        r"mask marks no token: there is nothing to learn",
    ),
    (
        lambda: I.sft_loss(tiny(), (IDS, IDS)),
        TypeError,
        r"batch must be \(ids, targets, segments, mask\) as pack or shifted make; got "
        r"tuple of length 2",
    ),
    (
        lambda: I.response_logprobs(tiny(), IDS, MASK[:, :5]),
        ValueError,
        r"mask \(1, 5\) must match ids \(1, 6\)",
    ),
    (
        lambda: I.response_logprobs(tiny(), IDS, ~MASK),
        ValueError,
        r"mask marks position 0, which no token precedes",
    ),
    (
        lambda: I.response_logprobs(tiny(), IDS.float(), MASK),
        TypeError,
        r"ids must be an integer \(long\) tensor of token ids",
    ),
    (
        lambda: I.response_logprobs("model", IDS, MASK),
        TypeError,
        r"model must be a gpt.GPT; got str",
    ),
    # decoding
    (
        lambda: I.respond(torch.nn.Linear(2, 2), ["hi"]),
        TypeError,
        r"model must be a gpt.GPT; got Linear",
    ),
    (
        lambda: I.respond(tiny(), "hi"),
        TypeError,
        r"prompts must be a non-empty list of str; got str 'hi'",
    ),
    (
        lambda: I.respond(tiny(), []),
        TypeError,
        r"prompts must be a non-empty list of str; got list \[\]",
    ),
    (
        lambda: I.respond(tiny(), ["hi"], max_new=0),
        ValueError,
        r"max_new must be an int >= 1; got int 0",
    ),
    (
        lambda: I.respond(tiny(), ["hi"], temperature=-1.0),
        ValueError,
        r"temperature must be a finite number in \[0, inf\); got float -1.0",
    ),
    (
        lambda: I.respond(tiny(), ["hi"], temperature=1.0),
        TypeError,
        r"generator must be a torch.Generator; got NoneType",
    ),
    (
        lambda: I.respond(tiny(), ["hi"], stop="\n\n"),
        ValueError,
        r"stop must be one token \(a special token or a character\); got '\\n\\n'",
    ),
    (
        lambda: I.respond(tiny(), ["a" * 20]),
        ValueError,
        r"a prompt of 22 tokens leaves no room to answer in the model's seq_len = 16",
    ),
    (
        lambda: I.accuracy(tiny(), [("What is 1 + 2?", "3")], "sum"),
        ValueError,
        r"kind must be one of .*got str 'sum'",
    ),
    # recipes and models
    (lambda: I.SFTRecipe(steps=0), ValueError, r"SFTRecipe.steps must be an int >= 1"),
    (
        lambda: I.SFTRecipe(steps=5, warmup=5),
        ValueError,
        r"SFTRecipe.warmup must be an int in 0..4; got int 5",
    ),
    (
        lambda: I.SFTRecipe(lr=0.0),
        ValueError,
        r"SFTRecipe.lr must be a finite number in \(0, inf\); got float 0.0",
    ),
    (
        lambda: I.ChatRecipe("recipe", 100),
        TypeError,
        r"ChatRecipe.base must be a pretrain.Recipe; got str 'recipe'",
    ),
    (
        lambda: I.ChatRecipe(I.RECIPES["smoke"].base, 0),
        ValueError,
        r"ChatRecipe.corpus_chars must be an int >= 1; got int 0",
    ),
    (
        lambda: I.ChatRecipe(I.RECIPES["smoke"].base, 10, sft={}),
        TypeError,
        r"ChatRecipe.sft must be an SFTRecipe; got dict",
    ),
    (
        lambda: I.recipe("laptop"),
        ValueError,
        r"profile must be one of \('smoke', 'cpu', 'gpu'\); got str 'laptop'",
    ),
    (
        lambda: I.model_path("cpu", "dpo"),
        ValueError,
        r"part must be one of \('base', 'sft'\); got str 'dpo'",
    ),
    (
        lambda: I.base_model("tpu"),
        ValueError,
        r"profile must be one of .*got str 'tpu'",
    ),
    (lambda: I.sft_model(None), ValueError, r"profile must be one of .*got NoneType"),
    (lambda: I.sft_examples(0, 1), ValueError, r"n_per_kind must be an int >= 1"),
    (
        lambda: I.finetune(tiny(), {"steps": 3}),
        TypeError,
        r"recipe must be an SFTRecipe; got dict",
    ),
    (
        lambda: I.finetune("gpt", I.SFTRecipe()),
        TypeError,
        r"model must be a gpt.GPT; got str",
    ),
    (
        lambda: I.finetune(tiny(), I.SFTRecipe(), masked="yes"),
        TypeError,
        r"masked must be a bool; got str 'yes'",
    ),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()


MORE = [
    (lambda: I.mix(0), ValueError, r"n must be an int >= 1; got int 0"),
    (lambda: I.echo_pairs([("add", "What is 1 + 2?")]), TypeError,
     r"items must be a non-empty list of \(kind, prompt, answer\); got list"),
    (lambda: I.echo_pairs([]), TypeError,
     r"items must be a non-empty list of \(kind, prompt, answer\); got list \[\]"),
    (lambda: I.echo_pairs([("sum", "What is 1 + 2?", "3")]), ValueError,
     r"kind must be one of .*got str 'sum'"),
    (lambda: I.echo_pairs([("add", "Say 1 + 2", "3")]), ValueError,
     r"prompt is not an instruction of kind 'add' in PHRASINGS: 'Say 1 \+ 2'"),
    (lambda: I.operand("add", 12), TypeError, r"prompt must be str; got int 12"),
    (lambda: I.logprobs(tiny(), ["a"], ["b", "c"]), ValueError,
     r"responses must be a list of one str per prompt \(1\); got list"),
    (lambda: I.logprobs("gpt", ["a"], ["b"]), TypeError, r"model must be a gpt.GPT; got str"),
]


@pytest.mark.parametrize("call, error, message", MORE)
def test_more_bad_input_is_refused(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_finetune_refuses_a_stop_beyond_the_recipe():
    with pytest.raises(ValueError, match=r"stop must be an int in 1..10; got int 11"):
        I.finetune(tiny(), I.SFTRecipe(steps=10, warmup=2), stop=11)
