"""lecturelib.transformers.sampling refuses bad input with a message that names the argument, what was
expected and what was given (one row per wrong input)."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.transformers import decoding, sampling

TREE = decoding.TreeLM(3, 2)
START = torch.zeros(1, 1, dtype=torch.long)
Z = torch.tensor([1.0, 2.0, 3.0])
NAN_Z = torch.tensor([1.0, math.nan, 3.0])
DRAWS = torch.tensor([0, 1, 2, 2])
PROBS = torch.tensor([0.2, 0.3, 0.5])
CHARS = [*"0123456789", "</s>"]
RULE = sampling.regex_allowed(r"\d\d", CHARS, eos=10, n_prompt=1)


def constant(row: torch.Tensor) -> decoding.Step:
    return lambda prefixes: row.expand(len(prefixes), -1)


CASES = [
    # sample
    (lambda: sampling.sample(TREE, START, 2, generator=0), TypeError,
     r"generator must be a torch.Generator or None; got int 0"),
    (lambda: sampling.sample(TREE, torch.zeros(1, 1), 2), TypeError, r"prompts must be a long tensor"),
    (lambda: sampling.sample(TREE, -START - 1, 2), ValueError, r"prompts must hold token ids >= 0"),
    (lambda: sampling.sample(TREE, START, 2, eos=7), ValueError, r"eos must be an int in 0\.\.2"),
    (lambda: sampling.sample(constant(NAN_Z), START, 1), ValueError,
     r"step\(prefixes\) must not hold nan; got 1 nan of 3"),
    (lambda: sampling.sample(constant(torch.full((3,), -math.inf)), START, 1), ValueError,
     r"every logit of some row is -inf: there is nothing to sample"),
    # chi_square
    (lambda: sampling.chi_square(DRAWS.float(), PROBS), TypeError,
     r"draws must be a non-empty 1-D long tensor of token ids \(n,\); got torch.float32"),
    (lambda: sampling.chi_square(DRAWS[:0], PROBS), TypeError, r"draws must be a non-empty 1-D"),
    (lambda: sampling.chi_square(DRAWS.view(2, 2), PROBS), TypeError, r"draws must be a non-empty 1-D"),
    (lambda: sampling.chi_square([0, 1], PROBS), TypeError, r"draws must be .*got list"),
    (lambda: sampling.chi_square(DRAWS - 1, PROBS), ValueError,
     r"draws must be ids in 0\.\.2 \(the length of probs\); got ids from -1 to 1"),
    (lambda: sampling.chi_square(DRAWS + 1, PROBS), ValueError, r"got ids from 1 to 3"),
    (lambda: sampling.chi_square(DRAWS, PROBS.tolist()), TypeError,
     r"probs must be a 1-D float tensor \(v,\); got list"),
    (lambda: sampling.chi_square(DRAWS, PROBS[None]), TypeError, r"probs must be a 1-D float tensor"),
    (lambda: sampling.chi_square(DRAWS, torch.tensor([1, 1, 1])), TypeError,
     r"probs must be a 1-D float tensor .*got torch.int64"),
    (lambda: sampling.chi_square(DRAWS, -PROBS), ValueError, r"probs must be finite, >= 0 and not"),
    (lambda: sampling.chi_square(DRAWS, torch.zeros(3)), ValueError, r"not all 0"),
    (lambda: sampling.chi_square(DRAWS, torch.tensor([0.5, math.nan, 0.5])), ValueError,
     r"probs must be finite"),
    # temperature, top_k, top_p
    (lambda: sampling.temperature(Z, 0.0), ValueError,
     r"the temperature T must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: sampling.temperature(Z, -1.0), ValueError, r"temperature T must be .*got float -1.0"),
    (lambda: sampling.temperature(Z, math.nan), ValueError, r"temperature T must be .*got float nan"),
    (lambda: sampling.temperature(Z, math.inf), ValueError, r"temperature T must be .*got float inf"),
    (lambda: sampling.temperature(Z, "0.7"), ValueError, r"temperature T must be .*got str '0.7'"),
    (lambda: sampling.temperature(torch.tensor([1, 2]), 1.0), TypeError,
     r"logits must be a float tensor \(\.\.\., v\); got torch.int64"),
    (lambda: sampling.temperature(NAN_Z, 1.0), ValueError, r"logits must not hold nan; got 1 nan of 3"),
    (lambda: sampling.temperature(torch.tensor(1.0), 1.0), ValueError,
     r"logits must be \(\.\.\., v\) with a non-empty vocabulary v >= 1; got shape \(\)"),
    (lambda: sampling.top_k(Z, 0), ValueError, r"k must be an int >= 1; got int 0"),
    (lambda: sampling.top_k(Z, 2.5), ValueError, r"k must be an int >= 1; got float 2.5"),
    (lambda: sampling.top_k(Z, True), ValueError, r"k must be an int >= 1; got bool True"),
    (lambda: sampling.top_k(torch.zeros(3, 0), 1), ValueError, r"non-empty vocabulary"),
    (lambda: sampling.top_k(NAN_Z, 2), ValueError, r"logits must not hold nan"),
    (lambda: sampling.top_p(Z, 0.0), ValueError, r"p must be a finite number in \(0, 1\]; got float 0.0"),
    (lambda: sampling.top_p(Z, 1.5), ValueError, r"p must be a finite number in \(0, 1\]; got float 1.5"),
    (lambda: sampling.top_p(Z, math.nan), ValueError, r"p must be .*got float nan"),
    (lambda: sampling.top_p(Z, "0.9"), ValueError, r"p must be .*got str '0.9'"),
    (lambda: sampling.top_p(NAN_Z, 0.9), ValueError, r"logits must not hold nan"),
    # contrastive, contrastive_step
    (lambda: sampling.contrastive(Z, Z, 1.5), ValueError,
     r"alpha must be a finite number in \[0, 1\]; got float 1.5"),
    (lambda: sampling.contrastive(Z, Z, math.nan), ValueError, r"alpha must be .*got float nan"),
    (lambda: sampling.contrastive(Z, Z[:2], 0.1), ValueError,
     r"strong and weak logits must have one shape; got \(3,\) and \(2,\)"),
    (lambda: sampling.contrastive(Z, Z.tolist(), 0.1), TypeError, r"weak must be a float tensor"),
    (lambda: sampling.contrastive(NAN_Z, Z, 0.1), ValueError, r"strong must not hold nan"),
    (lambda: sampling.contrastive(Z, NAN_Z, 0.1), ValueError, r"weak must not hold nan"),
    (lambda: sampling.contrastive_step(TREE, None), TypeError, r"weak must be callable; got NoneType"),
    (lambda: sampling.contrastive_step(TREE, TREE, -0.5), ValueError, r"alpha must be a finite number"),
    # constrain
    (lambda: sampling.constrain(TREE, [True, False, True]), TypeError,
     r"allowed must be callable; got list"),
    (lambda: sampling.constrain(TREE, lambda p: torch.ones(len(p), 2, dtype=torch.bool))(START),
     ValueError, r"allowed\(prefixes\) must be a bool mask of shape \(1, 3\); got torch.bool tensor"),
    (lambda: sampling.constrain(TREE, lambda p: torch.ones(len(p), 3))(START), ValueError,
     r"must be a bool mask of shape \(1, 3\); got torch.float32"),
    (lambda: sampling.constrain(TREE, lambda p: [[True] * 3])(START), ValueError,
     r"must be a bool mask of shape \(1, 3\); got list"),
    (lambda: sampling.constrain(TREE, lambda p: torch.zeros(len(p), 3, dtype=torch.bool))(START),
     ValueError, r"the constraint allows no token after some prefix"),
    # regex_allowed
    (lambda: sampling.regex_allowed(r"\d+", "0123456789", 10, 1), TypeError,
     r"tokens must be a list of str, the text of each token id; got str"),
    (lambda: sampling.regex_allowed(r"\d+", [0, 1], 1, 1), TypeError, r"tokens must be a list of str"),
    (lambda: sampling.regex_allowed(r"\d+", CHARS, 11, 1), ValueError,
     r"eos must be an int in 0\.\.10; got int 11"),
    (lambda: sampling.regex_allowed(r"\d+", CHARS, -1, 1), ValueError, r"eos must be an int in 0\.\.10"),
    (lambda: sampling.regex_allowed(r"\d+", CHARS, 10, -1), ValueError,
     r"n_prompt must be an int >= 0; got int -1"),
    (lambda: sampling.regex_allowed(r"(\d", CHARS, 10, 1), ValueError,
     r"pattern must be a valid regular expression; got '\(\\\\d'"),
    (lambda: sampling.regex_allowed(5, CHARS, 10, 1), TypeError, r"pattern must be a str; got int 5"),
    (lambda: sampling.regex_allowed(r"\d+", CHARS, 10, 1, sep=None), TypeError,
     r"sep must be a str; got NoneType"),
    (lambda: RULE(torch.tensor([[10, 11]])), ValueError,
     r"every id of prefixes must be an int in 0\.\.10; got int 11"),
    (lambda: RULE(torch.tensor([[10, -1]])), ValueError, r"prefixes must hold token ids >= 0"),
    (lambda: RULE(torch.tensor([10, 1])), ValueError, r"prefixes must be \(b, t\) with b, t >= 1"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
