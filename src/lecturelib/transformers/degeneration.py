"""Chapter 10: how degenerate generated text is, by its repeated n-grams.

`repetition` is the fraction of a sequence's n-grams that already occurred earlier
in it (Welleck et al., 2020, arXiv:1908.04319); `distinct_n` the distinct n-grams
of a set of sequences over all their n-grams (Li et al., 2016, arXiv:1510.03055).
Sequences are lists of int token ids, e.g. `tensor.tolist()`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lecturelib.recurrence.seq2seq import ngrams
from lecturelib.validate import check_int, describe


def check_tokens(tokens: Sequence[int], name: str = "tokens") -> None:
    """A list of int token ids (not a tensor, not text)."""
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise TypeError(
            f"{name} must be a list of int token ids "
            f"(e.g. tensor.tolist()); got {describe(tokens)}"
        )
    bad = [t for t in tokens if isinstance(t, bool) or not isinstance(t, int)]
    if bad:
        raise TypeError(
            f"{name} must be a list of int token ids "
            f"(e.g. tensor.tolist()); got an element {describe(bad[0])}"
        )


def check_repetition(tokens, n) -> None:
    """The arguments of `repetition`."""
    check_int(n, "n", 1)
    check_tokens(tokens)


def repetition(tokens: Sequence[int], n: int = 4) -> float:
    """Share of repeated n-grams in `tokens`: `1 - unique / total` (0.0 if none)."""
    check_repetition(tokens, n)
    counts = ngrams(list(tokens), n)
    total = sum(counts.values())
    return 0.0 if total == 0 else 1 - len(counts) / total


def check_distinct_n(sequences, n) -> None:
    """The arguments of `distinct_n`: lists of ids holding at least one
    n-gram."""
    check_int(n, "n", 1)
    if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Sequence):
        raise TypeError(
            f"sequences must be a list of token-id lists; got {describe(sequences)}"
        )
    for s in sequences:
        check_tokens(s, "each of sequences")
    if all(len(s) < n for s in sequences):
        raise ValueError(f"the sequences hold no {n}-gram")


def distinct_n(sequences: Sequence[Sequence[int]], n: int = 2) -> float:
    """Distinct n-grams of all the sequences over their total number of n-grams."""
    check_distinct_n(sequences, n)
    counts = sum((ngrams(list(s), n) for s in sequences), start=ngrams([], n))
    total = sum(counts.values())
    return len(counts) / total
