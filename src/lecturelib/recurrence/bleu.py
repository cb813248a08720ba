"""Chapter 4: BLEU, the score of a translation, and BLEU by source length.

- `BleuReport` holds the corpus BLEU of a test set (`seq2seq.evaluate` makes
  it) with per-sentence scores, and `BleuReport.by_length` regroups them by source
  length;
- `plot_bleu_by_length` draws BLEU against source length;
- `ngrams` and `formula_bleu` write corpus BLEU (Papineni et al., 2002) out
  from its definition, the oracle of `lecturelib.metrics.bleu` in the tests.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from lecturelib import metrics
from lecturelib.recurrence import corpus
from lecturelib.recurrence.corpus import check_token_lists
from lecturelib.validate import check_sizes


@dataclass
class BleuReport:
    """Corpus BLEU of a test set, with per-sentence scores for plots by length."""

    bleu: float
    sentence_bleu: list[float]
    src_len: list[int]
    sources: list[list[str]]
    hypotheses: list[list[str]]
    references: list[list[str]]

    def by_length(self, edges: Sequence[int]) -> dict[str, tuple[float, int]]:
        """Corpus BLEU and the number of sentences per source-length bin
        `[e_i, e_{i+1})` (BLEU is NaN for a bin without sentences)."""
        if (
            len(edges) < 2
            or any(isinstance(e, bool) or not isinstance(e, int) for e in edges)
            or any(lo >= hi for lo, hi in pairwise(edges))
        ):
            raise ValueError(
                f"edges must be at least two increasing ints; got {edges!r}"
            )
        out = {}
        for lo, hi in pairwise(edges):
            rows = [i for i, n in enumerate(self.src_len) if lo <= n < hi]
            hyps = [corpus.detokenize(self.hypotheses[i]) for i in rows]
            refs = [corpus.detokenize(self.references[i]) for i in rows]
            label = f"{lo}" if hi == lo + 1 else f"{lo}–{hi - 1}"
            out[label] = (metrics.bleu(hyps, refs) if rows else math.nan, len(rows))
        return out


def plot_bleu_by_length(
    report: BleuReport,
    edges: Sequence[int],
    family: str,
    label: str,
    ax=None,
    style: str = "o-",
):
    """Corpus BLEU of each source-length group (a line at the group centres) and the
    mean sentence BLEU of each exact length (light points), in the colour of
    `family`."""
    import matplotlib.pyplot as plt

    from lecturelib import plot

    ax = ax if ax is not None else plt.subplots()[1]
    groups = report.by_length(edges)
    centres = [(lo + hi - 1) / 2 for lo, hi in pairwise(edges)]
    color = plot.family_color(family)
    ax.plot(centres, [b for b, _ in groups.values()], style, color=color, label=label)
    per_length: dict[int, list[float]] = {}
    for n, score in zip(report.src_len, report.sentence_bleu):
        per_length.setdefault(n, []).append(score)
    lengths = sorted(per_length)
    ax.plot(
        lengths,
        [sum(per_length[n]) / len(per_length[n]) for n in lengths],
        ".",
        color=color,
        alpha=0.4,
    )
    ax.set(xlabel="source length (tokens)", ylabel="test BLEU", ylim=(0, None))
    ax.legend()
    return ax


def check_ngrams(tokens, n) -> None:
    """The arguments of `ngrams`."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(
            f"tokens must be a list of str tokens (split the text first); "
            f"got {tokens!r:.60}"
        )
    check_sizes(n=n)


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    check_ngrams(tokens, n)
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def check_formula_bleu(hypotheses, references, max_n) -> None:
    """The arguments of `formula_bleu`: as many hypotheses as references."""
    check_token_lists(hypotheses, "hypotheses")
    check_token_lists(references, "references")
    check_sizes(max_n=max_n)
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(
            f"need as many hypotheses as references (>0); got "
            f"{len(hypotheses)} and {len(references)}"
        )


def formula_bleu(
    hypotheses: Sequence[list[str]], references: Sequence[list[str]], max_n: int = 4
) -> float:
    """Unsmoothed corpus BLEU, 0–100, from its definition: `BP · exp(mean log p_n)`."""
    check_formula_bleu(hypotheses, references, max_n)
    matches, totals = [0] * max_n, [0] * max_n
    for hyp, ref in zip(hypotheses, references):
        for n in range(1, max_n + 1):
            h, r = ngrams(hyp, n), ngrams(ref, n)
            matches[n - 1] += sum(min(c, r[g]) for g, c in h.items())  # clipped counts
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if min(matches) == 0:
        return 0.0
    c, r = sum(map(len, hypotheses)), sum(map(len, references))
    log_p = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    return 100 * min(1.0, math.exp(1 - r / c)) * math.exp(log_p)
