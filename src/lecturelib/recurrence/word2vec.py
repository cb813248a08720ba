"""Chapter 1: word embeddings with word2vec's skip-gram.

- `subsample`, `skipgram_pairs` and `noise_distribution` prepare the
  training data: frequent words dropped at random, `(center, context)` pairs within a
  window, and the unigram^0.75 distribution of negative samples;
- `sgns_loss` and `SkipGram` are skip-gram with negative sampling (Mikolov
  et al., 2013, arXiv:1310.4546), trained with (sparse) Adam instead of plain SGD with a
  decaying rate, and with both embedding tables initialised at small random values;
- `nearest` and `project_2d` look at the learned vectors: cosine neighbours
  and a 2-D principal-component projection.

Shapes use `b` batch, `d` width, `k` negative samples, `v` vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.validate import (
    check_ids,
    check_int,
    check_number,
    check_sizes,
    check_tensor,
    describe,
)


def check_counts(counts: torch.Tensor) -> None:
    """`counts` must be a 1-D tensor of word counts, finite, >= 0, not all 0."""
    if (
        not isinstance(counts, torch.Tensor)
        or counts.dim() != 1
        or counts.dtype == torch.bool
    ):
        raise TypeError(
            f"counts must be a 1-D tensor of counts per word (v,); "
            f"got {describe(counts)}"
        )
    if (
        (counts < 0).any()
        or counts.sum() <= 0
        or not torch.isfinite(counts.float()).all()
    ):
        raise ValueError(
            f"counts must be finite, >= 0 and not all 0; got {counts.tolist()[:8]}"
        )


def subsample(
    ids: torch.Tensor,
    counts: torch.Tensor,
    t: float = 1e-4,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Drop each occurrence of word `w` with probability `1 - sqrt(t / f(w))`
    (word2vec's subsampling of frequent words; `f` is the relative frequency).
    Shapes: `(n,)` → `(m,)`."""
    check_counts(counts)
    check_ids(ids, "ids", dims=1, vocab_size=len(counts), min_len=0)
    check_number(t, "t", 0.0, low_open=True)
    freq = counts.float() / counts.sum()
    keep = (t / freq).sqrt().clamp(max=1.0)
    return ids[torch.rand(len(ids), generator=generator) < keep[ids]]


def skipgram_pairs(ids: torch.Tensor, window: int) -> torch.Tensor:
    """All `(center, context)` pairs with the context at most `window` positions
    away.

    Shapes: ids `(n,)` → pairs `(p, 2)`.
    """
    check_ids(ids, "ids", dims=1, min_len=0)
    check_int(window, "window", 1)
    pairs = []
    for offset in range(1, window + 1):
        pairs.append(torch.stack([ids[:-offset], ids[offset:]], dim=1))  # context right
        pairs.append(torch.stack([ids[offset:], ids[:-offset]], dim=1))  # context left
    return torch.cat(pairs)


def noise_distribution(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """word2vec's distribution for negative samples: unigram counts raised to `power`,
    normalised."""
    check_counts(counts)
    check_number(power, "power", 0.0)
    weights = counts.float() ** power
    return weights / weights.sum()


def check_sgns(
    center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor
) -> None:
    """The arguments of `sgns_loss`."""
    check_tensor(center, "center", "(b, d)", 2)
    check_tensor(context, "context", "(b, d)", 2)
    check_tensor(negatives, "negatives", "(b, k, d)", 3)
    b, d = center.shape
    if context.shape != (b, d) or negatives.shape[0] != b or negatives.shape[2] != d:
        raise ValueError(
            f"center (b, d), context (b, d) and negatives (b, k, d) must "
            f"agree on b and d; got {tuple(center.shape)}, "
            f"{tuple(context.shape)} and {tuple(negatives.shape)}"
        )


def sgns_loss(
    center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor
) -> torch.Tensor:
    """Skip-gram negative-sampling loss `-[log σ(w·c) + Σ_k log σ(-w·c̃_k)]`.
    Shapes: center (b, d), context (b, d), negatives (b, k, d) -> batch-mean scalar."""
    check_sgns(center, context, negatives)
    positive = F.logsigmoid((center * context).sum(-1))  # (b,)
    negative = F.logsigmoid(-torch.einsum("bd,bkd->bk", center, negatives))  # (b, k)
    return -(positive + negative.sum(-1)).mean()


def check_skipgram_input(model, center, context, negatives) -> None:
    """The ids given to `SkipGram.forward`."""
    v = model.center.num_embeddings
    check_ids(center, "center", dims=1, vocab_size=v)
    check_ids(context, "context", dims=1, vocab_size=v)
    check_ids(negatives, "negatives", dims=2, vocab_size=v)


class SkipGram(nn.Module):
    """Two embedding tables: `center` (the word vectors we keep) and `context`.

    Shapes: center ids `(b,)`, context ids `(b,)`, negative ids `(b, k)` → scalar
    loss.
    """

    def __init__(self, vocab_size: int, d_embed: int, sparse: bool = False):
        super().__init__()
        check_sizes(vocab_size=vocab_size, d_embed=d_embed)
        # sparse=True: each step updates only the rows it used (with
        # torch.optim.SparseAdam)
        self.center = nn.Embedding(vocab_size, d_embed, sparse=sparse)
        self.context = nn.Embedding(vocab_size, d_embed, sparse=sparse)
        # word2vec starts the context table at zero; with Adam, whose first steps move
        # every row by about the learning rate whatever its gradient, that start makes
        # all vectors share one direction, so both tables start small and random here.
        nn.init.normal_(self.center.weight, std=0.1)
        nn.init.normal_(self.context.weight, std=0.1)

    def forward(self, center, context, negatives) -> torch.Tensor:
        check_skipgram_input(self, center, context, negatives)
        return sgns_loss(
            self.center(center), self.context(context), self.context(negatives)
        )


def nearest(vectors: torch.Tensor, query: int, k: int = 5) -> list[tuple[int, float]]:
    """The `k` rows most cosine-similar to row `query` (itself excluded):
    `(id, cosine)`.

    Shapes: vectors `(v, d)`.
    """
    check_tensor(vectors, "vectors", "(v, d)", 2)
    check_int(query, "query", 0, len(vectors) - 1)
    check_int(k, "k", 1, len(vectors) - 1)
    unit = F.normalize(vectors, dim=1)
    sims = unit @ unit[query]
    sims[query] = -math.inf
    top = sims.topk(k)
    return list(zip(top.indices.tolist(), top.values.tolist()))


def project_2d(vectors: torch.Tensor) -> torch.Tensor:
    """Project rows onto their first two principal components. Shapes: `(n, d)` →
    `(n, 2)`."""
    check_tensor(vectors, "vectors", "(n, d)", 2)
    if min(vectors.shape) < 2:
        raise ValueError(
            f"vectors must be (n, d) with n, d >= 2 for two components; "
            f"got shape {tuple(vectors.shape)}"
        )
    centred = vectors - vectors.mean(dim=0)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)
    return centred @ v[:2].T
