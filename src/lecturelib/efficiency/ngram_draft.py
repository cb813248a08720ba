"""Chapter 17, a draft with no network for speculative decoding
(`lecturelib.efficiency.speculative`): next-token probabilities from n-gram counts
(what followed the same context in the training text is a cheap guess of what follows
now).

- `NGramDraft`: counts of every context of up to `order - 1` tokens in a
  training text, smoothed by Witten–Bell interpolation with shorter contexts, all
  computed once; a lookup returns the distribution of the longest seen context.

Shapes: `v` vocabulary.
"""

from __future__ import annotations

import torch

from lecturelib.validate import check_int, describe, is_int


def check_ngram_draft(ids, order, vocab_size) -> None:
    """The arguments of `NGramDraft`: `order` and `vocab_size` ints >= 1 and
    at least `order` integer token ids in `0..vocab_size - 1`."""
    check_int(order, "order", 1)
    check_int(vocab_size, "vocab_size", 1)
    message = (
        f"ids must be a 1-D integer tensor of at least order = {order} token ids; "
        f"got {describe(ids)}"
    )
    if (
        not isinstance(ids, torch.Tensor)
        or ids.is_floating_point()
        or ids.is_complex()
        or ids.dtype == torch.bool
    ):
        raise TypeError(message)
    if ids.dim() != 1 or len(ids) < order:
        raise ValueError(message)
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(
            f"ids must lie in 0..{vocab_size - 1} (vocab_size {vocab_size}); got ids "
            f"from {int(ids.min())} to {int(ids.max())}"
        )


def check_context(ids, order: int, vocab_size: int) -> None:
    """The context of `NGramDraft.probs`: a list (or tuple) of int token ids, the
    last `order - 1` of which (those looked up) lie in `0..vocab_size - 1` (an id
    outside would be read as another context). A tensor is refused: its elements are not
    dictionary keys, so every lookup would miss and give the unigram distribution."""
    if not isinstance(ids, (list, tuple)):
        hint = " (pass ids.tolist())" if isinstance(ids, torch.Tensor) else ""
        raise TypeError(
            f"ids must be a list of int token ids{hint}; got {describe(ids)}"
        )
    for token in ids[max(len(ids) - (order - 1), 0) :]:
        if not is_int(token):
            raise TypeError(
                f"ids must be a list of int token ids; got {describe(token)}"
            )
        if not 0 <= token < vocab_size:
            raise ValueError(
                f"ids must lie in 0..{vocab_size - 1} (vocab_size {vocab_size}); "
                f"got {token}"
            )


class NGramDraft:
    """Next-token probabilities from counts: after a context `h` of up to
    `order - 1` tokens, Witten–Bell interpolation with the next shorter context
    `h'` (down to the uniform distribution),

        p(x | h) = (c(h, x) + u(h) · p(x | h')) / (c(h) + u(h)),

    where `c(h)` counts the context, `c(h, x)` the context followed by `x` and
    `u(h)` the distinct tokens seen after it. Every seen context's distribution is
    computed once, at construction; a lookup returns that of the longest seen context.
    Built from a 1-D tensor of training ids; `probs` takes the ids so far.
    """

    def __init__(self, ids: torch.Tensor, order: int, vocab_size: int):
        check_ngram_draft(ids, order, vocab_size)
        self.order, self.vocab_size = order, vocab_size
        self.rows, self.probs_of = [], []  # per context length k = 0..order-1
        ids, v = ids.long(), vocab_size
        shorter_keys = torch.zeros(1, dtype=torch.long)  # below k = 0: uniform
        shorter = torch.full((1, v), 1 / v, dtype=torch.float64)
        for k in range(order):
            n = len(ids) - k
            context = torch.zeros(n, dtype=torch.long)
            for j in range(k):  # the k previous ids as one number
                context = context * v + ids[j : j + n]
            keys, row = torch.unique(context, return_inverse=True)  # sorted keys
            counts = torch.zeros(len(keys), v, dtype=torch.float64)
            counts.index_put_(
                (row, ids[k:]), torch.ones(n, dtype=torch.float64), accumulate=True
            )
            distinct = (counts > 0).sum(1, keepdim=True).double()
            suffix = torch.searchsorted(shorter_keys, keys % v ** max(k - 1, 0))
            probs = (counts + distinct * shorter[suffix]) / (
                counts.sum(1, keepdim=True) + distinct
            )
            self.rows.append({key: i for i, key in enumerate(keys.tolist())})
            self.probs_of.append(probs)
            shorter_keys, shorter = keys, probs

    def probs(self, ids: list[int]) -> torch.Tensor:
        """The distribution of the token after `ids`. Shapes: → `(v,)` float64."""
        check_context(ids, self.order, self.vocab_size)
        for k in range(min(self.order - 1, len(ids)), 0, -1):  # longest seen first
            key = 0
            for token in ids[len(ids) - k :]:
                key = key * self.vocab_size + token
            i = self.rows[k].get(key)
            if i is not None:
                return self.probs_of[k][i]
        return self.probs_of[0][0]  # no context

    def logits(self, ids: list[int]) -> torch.Tensor:
        """`log p`: logits, so that a temperature divides them as a GPT's."""
        return self.probs(ids).log()
