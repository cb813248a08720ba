"""lecturelib.posttraining.evaluation: pass@k equals enumeration over every k-subset and
the binomial formula, answer perplexity reads only the answer, n-gram overlap flags
shared text."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import torch

from lecturelib.posttraining import evaluation


def enumerated_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """The fraction of the k-subsets of n samples (the first c correct) holding one."""
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(min(s) < c for s in subsets), len(subsets))


def test_pass_at_k_equals_enumeration_over_all_k_subsets():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                expected = float(enumerated_pass_at_k(n, c, k))
                assert math.isclose(
                    evaluation.pass_at_k(n, c, k),
                    expected,
                    rel_tol=1e-12,
                    abs_tol=1e-12,
                ), (n, c, k)


def test_pass_at_k_equals_the_binomial_formula_for_many_samples():
    for n, c, k in [
        (200, 3, 1),
        (200, 3, 10),
        (200, 3, 100),
        (200, 0, 50),
        (200, 150, 60),
    ]:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert math.isclose(evaluation.pass_at_k(n, c, k), float(exact), rel_tol=1e-12)


def test_pass_at_one_is_the_fraction_correct_and_plugging_in_is_biased_low():
    assert math.isclose(evaluation.pass_at_k(10, 3, 1), 0.3)
    n, c, k = 5, 1, 5
    assert evaluation.pass_at_k(n, c, k) == 1.0  # every 5 of the 5 samples holds it
    assert 1 - (1 - c / n) ** k < 0.7


def test_answer_perplexity_counts_only_the_answer_tokens():
    v = 7
    logprobs = torch.full((2, 5), -math.log(v))
    logprobs[:, :2] = -50.0  # prompt tokens, not counted
    mask = torch.tensor(
        [[False, False, True, True, False], [False, False, True, True, True]]
    )
    assert math.isclose(evaluation.answer_perplexity(logprobs, mask), v, rel_tol=1e-6)
    logprobs[1, 4] = 0.0  # a sure token lowers it
    assert evaluation.answer_perplexity(logprobs, mask) < v


def test_ngram_overlap_flags_test_items_that_share_an_n_gram_with_training():
    train = ["the cat sat on the mat", "what is 12 + 30 ?"]
    test = ["a cat sat by a rug", "what is 12 + 30 ?", "dogs bark"]
    assert evaluation.ngram_overlap(test, train, n=3) == 1 / 3  # "what is 12"
    assert evaluation.ngram_overlap(test, train, n=2) == 2 / 3  # and "cat sat"
    assert evaluation.ngram_overlap(test, [], n=2) == 0.0
    short = ["what is"]  # one 2-gram, in no training text
    assert evaluation.ngram_overlap(short, train, n=13) == 0.0
    assert evaluation.ngram_overlap(["what is 12 + 30 ?"], train, n=13) == 1.0
