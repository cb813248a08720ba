"""Bad input to lecturelib.posttraining.instructions: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import chat, instructions
from lecturelib.pretraining import gpt


def tiny():
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(
            vocab_size=len(chat.VOCAB), seq_len=16, d_model=16, n_layers=1, n_heads=2
        )
    )


CASES = [
    # tasks
    (
        lambda: instructions.problems("multiply", 3),
        ValueError,
        r"kind must be one of \('reverse', 'sort', 'date', 'add'\); got str 'multiply'",
    ),
    (lambda: instructions.problems("add", 0), ValueError, r"n must be an int >= 1; got int 0"),
    (
        lambda: instructions.problems("add", 2, seed=-1),
        ValueError,
        r"seed must be an int in 0..4611686018427387904; got int -1",
    ),
    (
        lambda: instructions.problems("add", 2, held_out=1),
        TypeError,
        r"held_out must be a bool; got int 1",
    ),
    (
        lambda: instructions.operands("sort", 2.0),
        ValueError,
        r"n must be an int >= 1; got float 2.0",
    ),
    (
        lambda: instructions.solve("add", b"What is 1 + 2?"),
        TypeError,
        r"prompt must be str; got bytes",
    ),
    (
        lambda: instructions.solve("add", "What is one plus two?"),
        ValueError,
        r"not an addition 'a \+ b': 'one plus two'",
    ),
    (
        lambda: instructions.solve("add", "Tell me 1 + 2"),
        ValueError,
        r"prompt is not an instruction of kind 'add' in PHRASINGS: 'Tell me 1 \+ 2'",
    ),
    (
        lambda: instructions.solve("date", "ISO date: 31 February 1999"),
        ValueError,
        r"not a date in one of the task's formats: '31 February 1999'",
    ),
    (
        lambda: instructions.solve("date", "ISO date: Monday, March 3, 1998"),
        ValueError,
        r"not a date in one of the task's formats: 'Monday, March 3, 1998'",
    ),
    (
        lambda: instructions.is_correct("add", "What is 1 + 2?", 3),
        TypeError,
        r"response must be str; got int 3",
    ),
    (
        lambda: instructions.is_correct("sum", "What is 1 + 2?", "3"),
        ValueError,
        r"kind must be one of .*got str 'sum'",
    ),
    (lambda: instructions.follows_format(None), TypeError, r"response must be str; got NoneType"),
    (
        lambda: instructions.demonstrations("rotate", 2),
        ValueError,
        r"rule must be one of \('copy', 'reverse', 'alphabetise', 'double', 'reverse', "
        r"'sort', 'date', 'add'\); got str 'rotate'",
    ),
    (
        lambda: instructions.few_shot("copy", -1, 2),
        ValueError,
        r"shots must be an int >= 0; got int -1",
    ),
    (lambda: instructions.few_shot("copy", 1, 0), ValueError, r"n must be an int >= 1; got int 0"),
    (lambda: instructions.corpus(0), ValueError, r"n_chars must be an int >= 1; got int 0"),
    (
        lambda: instructions.accuracy(tiny(), [("What is 1 + 2?", "3")], "sum"),
        ValueError,
        r"kind must be one of .*got str 'sum'",
    ),
    (lambda: instructions.mix(0), ValueError, r"n must be an int >= 1; got int 0"),
    (lambda: instructions.echo_pairs([("add", "What is 1 + 2?")]), TypeError,
     r"items must be a non-empty list of \(kind, prompt, answer\); got list"),
    (lambda: instructions.echo_pairs([]), TypeError,
     r"items must be a non-empty list of \(kind, prompt, answer\); got list \[\]"),
    (lambda: instructions.echo_pairs([("sum", "What is 1 + 2?", "3")]), ValueError,
     r"kind must be one of .*got str 'sum'"),
    (lambda: instructions.echo_pairs([("add", "Say 1 + 2", "3")]), ValueError,
     r"prompt is not an instruction of kind 'add' in PHRASINGS: 'Say 1 \+ 2'"),
    (lambda: instructions.operand("add", 12), TypeError, r"prompt must be str; got int 12"),
    (lambda: instructions.scores(tiny(), [("add", "What is 1 + 2?")]), TypeError,
     r"items must be a non-empty list of \(kind, prompt, answer\)"),
    (lambda: instructions.corpus(10, seed=-1), ValueError,
     r"seed must be an int >= 0; got int -1"),
    (lambda: instructions.operands("sort", 2, exclude=["123"]), TypeError,
     r"exclude must be a set of input strings; got list"),
    (lambda: instructions.problems("add", 2, exclude={12}), TypeError,
     r"exclude must hold input strings; got int 12"),
    (lambda: instructions.mix(2, exclude=[("add", "1 + 2")]), TypeError,
     r"exclude must be a dict from kind to a set of inputs; got list"),
    (lambda: instructions.operands("add", 3, exclude={f"{a} + {b}" for a in range(100)
                                                      for b in range(100)}),
     ValueError, r"exclude leaves 0 problems of kind 'add' among \d+ drawn; n=3"),
    (lambda: instructions.seen_operands(0, 1), ValueError,
     r"n must be an int >= 1; got int 0"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
