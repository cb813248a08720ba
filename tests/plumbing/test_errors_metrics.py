"""lecturelib.metrics refuses bad input with a message that names the argument, what was
expected and what was given (one row per wrong input)."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib import metrics

LOGITS = torch.zeros(2, 3, 5)
TARGETS = torch.zeros(2, 3, dtype=torch.long)
NAN_LOGITS = LOGITS.clone().index_fill_(1, torch.tensor([1]), math.nan)
HYP, REF = ["the cat sat"], ["the cat sat"]

CASES = [
    (lambda: metrics.accuracy(torch.randn(0, 3), torch.zeros(0, dtype=torch.long)), ValueError,
     r"accuracy\(\): targets is empty \(shape \(0,\)\): there is nothing to score"),
    (lambda: metrics.accuracy(torch.randn(2, 3), torch.tensor([0.0, 2.0])), TypeError,
     r"accuracy\(\): targets must be integer class ids \(a long tensor\); got dtype "
     r"torch.float32"),
    (lambda: metrics.accuracy(torch.randn(2, 3), torch.tensor([0, 3])), ValueError,
     r"accuracy\(\): targets must be class ids in 0..2 \(v = 3\) or ignore_index=-100; "
     r"got values from 0 to 3"),
    # perplexity, nats_to_bits
    (lambda: metrics.perplexity(-0.1), ValueError, r"mean_nll must be a non-negative .*got -0.1"),
    (lambda: metrics.perplexity(math.nan), ValueError, r"mean_nll must be a non-negative.*got nan"),
    (lambda: metrics.perplexity("2.0"), TypeError, r"mean_nll must be a real number; got str"),
    (lambda: metrics.perplexity(True), TypeError, r"mean_nll must be a real number; got bool"),
    (lambda: metrics.perplexity(torch.ones(2)), ValueError,
     r"mean_nll must be one real number; got a tensor of shape \(2,\)"),
    (lambda: metrics.perplexity(torch.tensor(math.nan)), ValueError, r"mean_nll .* got nan"),
    (lambda: metrics.nats_to_bits(math.nan), ValueError, r"nats must be a non-negative .*got nan"),
    (lambda: metrics.nats_to_bits(-1.0), ValueError, r"nats must be a non-negative .*got -1.0"),
    (lambda: metrics.nats_to_bits(None), TypeError, r"nats must be a real number; got NoneType"),
    # accuracy and mean_nll share their checks: each row runs for both
    *[(lambda f=f, a=a: f(*a), err, msg) for f in (metrics.accuracy, metrics.mean_nll)
      for a, err, msg in [
          ((LOGITS.tolist(), TARGETS), TypeError, r"logits must be a torch.Tensor; got list"),
          ((LOGITS, [[0, 0, 0]] * 2), TypeError, r"targets must be a torch.Tensor; got list"),
          ((LOGITS.long(), TARGETS), TypeError,
           r"logits must be a floating-point tensor \(\.\.\., v\); got dtype torch.int64"),
          ((LOGITS, TARGETS.float()), TypeError,
           r"targets must be integer class ids .*got dtype torch.float32"),
          ((LOGITS, TARGETS.bool()), TypeError, r"targets must be integer .*got dtype torch.bool"),
          ((LOGITS, TARGETS, 1.5), TypeError, r"ignore_index must be an int; got 1.5"),
          ((LOGITS, TARGETS[:, :2]), ValueError,
           r"must agree on the leading axes; got \(2, 3, 5\) and \(2, 2\)"),
          ((LOGITS, TARGETS.T), ValueError, r"\(2, 3, 5\) and \(3, 2\)"),
          ((torch.tensor(1.0), torch.tensor(0)), ValueError, r"leading axes; got \(\) and \(\)"),
          ((LOGITS, TARGETS + 5), ValueError,
           r"targets must be class ids in 0\.\.4 \(v = 5\) or ignore_index=-100; got values "
           r"from 5 to 5"),
          ((LOGITS, TARGETS - 1), ValueError, r"class ids in 0\.\.4 .*got values from -1 to -1"),
          ((LOGITS, torch.full((2, 3), -100)), ValueError,
           r"every target is ignore_index=-100 \(an all-padding batch\)"),
          ((LOGITS, TARGETS, 0), ValueError, r"every target is ignore_index=0"),
          ((torch.zeros(0, 5), torch.zeros(0, dtype=torch.long)), ValueError, r"nothing to score"),
          ((NAN_LOGITS, TARGETS), ValueError,
           r"logits must be numbers; got NaN at 2 of 6 scored positions"),
      ]],
    # bleu and sentence_bleu
    (lambda: metrics.bleu("the cat", "the cat"), TypeError,
     r"hypotheses must be a list of strings \(one sentence each\); got str"),
    (lambda: metrics.bleu(HYP, "the cat sat"), TypeError, r"references must be a list .*got str"),
    (lambda: metrics.bleu((s for s in HYP), REF), TypeError,
     r"hypotheses must be a list .*got generator"),
    (lambda: metrics.bleu([["the", "cat"]], REF), TypeError,
     r"hypotheses\[0\] must be a detokenised str; got list \(join a list of tokens with "
     r"translation.detokenize first\)"),
    (lambda: metrics.bleu(HYP, [None]), TypeError, r"references\[0\] must be a detokenised str"),
    (lambda: metrics.bleu(HYP * 2, REF), ValueError, r"2 hypotheses but 1 references"),
    (lambda: metrics.bleu([], []), ValueError, r"at least one sentence pair; got none"),
    (lambda: metrics.bleu(HYP, REF, tokenize="words"), ValueError,
     r"tokenize must be one of none, zh, 13a, .*; got 'words'"),
    (lambda: metrics.sentence_bleu(["the", "cat"], "the cat"), TypeError,
     r"hypothesis must be a detokenised str; got list"),
    (lambda: metrics.sentence_bleu("the cat", ["the cat"]), TypeError,
     r"reference must be a detokenised str; got list"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
