"""Bad input to lecturelib.validate (the one vocabulary of argument checks) and to
lecturelib.glue_all: each row is a call, the exception it raises and its message."""

from __future__ import annotations

import pytest
import torch

import lecturelib
from lecturelib import validate

CASES = [
    (lambda: validate.check_strings([], "prompts"), TypeError,
     r"prompts must be a non-empty list of str; got list \[\]"),
    (lambda: validate.check_strings(["a", 3], "texts"), TypeError,
     r"texts must be a non-empty list of str; got list"),
    (lambda: validate.check_strings("abc", "prompts"), TypeError,
     r"prompts must be a non-empty list of str; got str"),
    (lambda: validate.check_int(0, "d_model", 1), ValueError,
     r"d_model must be an int >= 1; got int 0"),
    (lambda: validate.check_int(True, "n", 0), ValueError, r"n must be an int >= 0; got bool True"),
    (lambda: validate.check_int(5, "k", 0, 3), ValueError, r"k must be an int in 0\.\.3; got int 5"),
    (lambda: validate.check_number(float("nan"), "lr", 0, low_open=True), ValueError,
     r"lr must be a finite number in \(0, inf\); got float nan"),
    (lambda: validate.check_number(2.0, "p", 0, 1), ValueError,
     r"p must be a finite number in \[0, 1\]; got float 2.0"),
    (lambda: validate.check_bool(1, "causal"), TypeError, r"causal must be a bool; got int 1"),
    (lambda: validate.check_bool(None, "causal"), TypeError,
     r"causal must be a bool; got NoneType None"),
    (lambda: validate.check_choice("batch", "norm", ("rms", "layer")), ValueError,
     r"norm must be one of \('rms', 'layer'\); got str 'batch'"),
    (lambda: validate.check_choice(True, "k", (1, 2)), ValueError,
     r"k must be one of \(1, 2\); got bool True"),
    (lambda: validate.check_choice(1.0, "k", (1, 2)), ValueError,
     r"k must be one of \(1, 2\); got float 1.0"),
    (lambda: validate.check_type("net", "model", torch.nn.Module), TypeError,
     r"model must be Module; got str 'net'"),
    (lambda: validate.check_type(3, "model", torch.nn.Module, "a gpt.GPT"), TypeError,
     r"model must be a gpt.GPT; got int 3"),
    (lambda: validate.check_callable(3, "fn"), TypeError, r"fn must be callable; got int 3"),
    (lambda: validate.check_ids(torch.zeros(2, 3), "ids"), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32 tensor"),
    (lambda: validate.check_ids(torch.zeros(3, dtype=torch.long), "ids", dims=2), ValueError,
     r"ids must be 2-D \(b, t\) token ids; got shape \(3,\)"),
    (lambda: validate.check_ids(torch.tensor([0, 7]), "ids", vocab_size=5), ValueError,
     r"ids must hold token ids in 0\.\.4; got ids from 0 to 7"),
    (lambda: validate.check_on_device(torch.tensor(False), "ids must hold token ids >= 0"),
     ValueError, r"^ids must hold token ids >= 0$"),
    (lambda: validate.check_tensor(torch.zeros(2, dtype=torch.long), "x", "(b, d)"), TypeError,
     r"x must be a float tensor \(b, d\); got torch.int64 tensor of shape \(2,\)"),
    (lambda: validate.check_tensor(torch.zeros(2), "x", "(b, d)", dims=2), ValueError,
     r"x must be \(b, d\); got shape \(2,\)"),
    (lambda: validate.check_sizes(d_in=4, d_out=0), ValueError,
     r"d_out must be an int >= 1; got int 0"),
    (lambda: lecturelib.glue_all({3: 1.0}), TypeError,
     r"glue names must be non-empty strings; got \[3\]"),
    (lambda: lecturelib.glue_all({"": 1.0}), TypeError,
     r"glue names must be non-empty strings; got \[''\]"),
    (lambda: lecturelib.glue("word", "its $L$ steps"), ValueError,
     r"glued text 'word' is shown as plain text, so its TeX would stay untypeset"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_predicates_tell_ints_reals_and_integer_tensors():
    assert validate.is_int(3) and not validate.is_int(True) and not validate.is_int(3.0)
    assert validate.is_real(2.5) and not validate.is_real(False)
    assert validate.is_int_tensor(torch.tensor([1, 2]))
    assert not validate.is_int_tensor(torch.tensor([1.0])) and not validate.is_int_tensor([1])
    assert not validate.is_int_tensor(torch.tensor([True]))
