"""Bad input to lecturelib.posttraining.evaluation: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.posttraining import evaluation

LOGP = torch.zeros(2, 3)
MASK = torch.ones(2, 3, dtype=torch.bool)

CASES = [
    (
        lambda: evaluation.pass_at_k(0, 0, 1),
        ValueError,
        r"n must be an int >= 1; got int 0",
    ),
    (
        lambda: evaluation.pass_at_k(5, 6, 1),
        ValueError,
        r"c must be an int in 0..5; got int 6",
    ),
    (
        lambda: evaluation.pass_at_k(5, 2, 6),
        ValueError,
        r"k must be an int in 1..5; got int 6",
    ),
    (
        lambda: evaluation.pass_at_k(5, 2, 0),
        ValueError,
        r"k must be an int in 1..5; got int 0",
    ),
    (
        lambda: evaluation.pass_at_k(5.0, 2, 1),
        ValueError,
        r"n must be an int >= 1; got float 5.0",
    ),
    (
        lambda: evaluation.answer_perplexity(LOGP[0], MASK[0]),
        ValueError,
        r"logprobs must be \(b, t\); got shape \(3,\)",
    ),
    (
        lambda: evaluation.answer_perplexity(LOGP, MASK.long()),
        TypeError,
        r"mask must be a bool tensor \(b, t\); got torch.int64 tensor of shape "
        r"\(2, 3\)",
    ),
    (
        lambda: evaluation.answer_perplexity(LOGP, MASK[:, :2]),
        ValueError,
        r"mask must have the shape of logprobs \(2, 3\) and mark at least one "
        r"token; got torch.bool tensor of shape \(2, 2\) with 4 marked",
    ),
    (
        lambda: evaluation.answer_perplexity(LOGP, ~MASK),
        ValueError,
        r"mask must have the shape of logprobs \(2, 3\) and mark at least one "
        r"token; .* with 0 marked",
    ),
    (
        lambda: evaluation.ngram_overlap("a b", ["a b"]),
        TypeError,
        r"test must be a list of str; got str 'a b'",
    ),
    (
        lambda: evaluation.ngram_overlap(["a b"], [1]),
        TypeError,
        r"train must be a list of str; got list \[1\]",
    ),
    (
        lambda: evaluation.ngram_overlap([], ["a"]),
        ValueError,
        r"test must hold at least one text; got an empty list",
    ),
    (
        lambda: evaluation.ngram_overlap(["a"], ["a"], n=0),
        ValueError,
        r"n must be an int >= 1; got int 0",
    ),
    # probabilities where log-probabilities belong: a perplexity below 1
    (lambda: evaluation.answer_perplexity(torch.full((2, 3), 0.7), MASK), ValueError,
     r"logprobs \(the marked tokens\) must hold log-probabilities \(<= 0, not NaN\); "
     r"got a largest value of 0.7 \(probabilities instead of their logarithms\?\)"),
    (lambda: evaluation.answer_perplexity(LOGP.log1p() * float("nan"), MASK),
     ValueError, r"got a largest value of nan"),
    (lambda: evaluation.ngrams(3, 1), TypeError, r"text must be str; got int 3"),
    (lambda: evaluation.ngrams("a b", 0), ValueError, r"n must be an int >= 1; got int 0"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
