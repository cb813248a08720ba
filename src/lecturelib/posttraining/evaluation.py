"""Chapter 21: evaluating an assistant.

- `pass_at_k`: the probability that at least one of `k` samples solves a
  problem, estimated without bias from `n ≥ k` samples of which `c` are correct,
  `1 − C(n−c, k)/C(n, k)` (Chen et al., Codex, arXiv:2107.03374), computed as the
  paper's code does, `1 − ∏_{i=n−c+1}^{n} (1 − k/i)`, without the huge binomials.
  Estimating it as `1 − (1 − c/n)^k` is biased low.
- `answer_perplexity`: the perplexity of the reference answers' tokens, the number
  that pretraining optimises, to set beside the accuracy that the checker measures.
- `ngram_overlap`: the fraction of test items that share a word n-gram with the
  training data, the contamination check of GPT-3 (Brown et al., arXiv:2005.14165, which
  uses 13-grams).
"""

from __future__ import annotations

import math

import torch

from lecturelib.posttraining.rl import check_logprobs
from lecturelib.validate import check_int, check_tensor, check_type, describe


def check_pass_at_k(n, c, k) -> None:
    check_int(n, "n", 1)
    check_int(c, "c", 0, n)
    check_int(k, "k", 1, n)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from `n` samples with `c` correct: `1 − C(n−c, k)/C(n, k)`."""
    check_pass_at_k(n, c, k)
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def check_answer_perplexity(logprobs, mask) -> None:
    check_tensor(logprobs, "logprobs", "(b, t)", dims=2)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (b, t); got {describe(mask)}")
    if mask.shape != logprobs.shape or not mask.any():
        raise ValueError(
            f"mask must have the shape of logprobs {tuple(logprobs.shape)} and mark "
            f"at least one token; got {describe(mask)} with {int(mask.sum())} marked"
        )
    check_logprobs((logprobs[mask], "logprobs (the marked tokens)"))


def answer_perplexity(logprobs: torch.Tensor, mask: torch.Tensor) -> float:
    """`exp` of the mean negative log-probability of the masked (answer) tokens.

    Shapes: logprobs `(b, t)` per token, mask `(b, t)` bool → a number.
    """
    check_answer_perplexity(logprobs, mask)
    return math.exp(-logprobs[mask].mean().item())


def check_ngram_overlap(test, train, n) -> None:
    for name, texts in (("test", test), ("train", train)):
        if not isinstance(texts, (list, tuple)) or not all(
            isinstance(s, str) for s in texts
        ):
            raise TypeError(f"{name} must be a list of str; got {describe(texts)}")
    if not test:
        raise ValueError("test must hold at least one text; got an empty list")
    check_int(n, "n", 1)


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The word n-grams of `text` (a text of 1 to `n` words is one n-gram)."""
    check_type(text, "text", str)
    check_int(n, "n", 1)
    words = text.split()
    starts = range(max(1, len(words) - n + 1)) if words else ()
    return {tuple(words[i : i + n]) for i in starts}


def ngram_overlap(test: list[str], train: list[str], n: int = 13) -> float:
    """The fraction of `test` texts that share a word `n`-gram with `train`."""
    check_ngram_overlap(test, train, n)
    seen = set().union(*(ngrams(s, n) for s in train))
    return sum(bool(ngrams(s, n) & seen) for s in test) / len(test)
