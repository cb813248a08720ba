"""Chapter 1: language models and word embeddings.

- `Vocab` maps symbols (characters or words) to ids and back;
- `split_ids` makes contiguous train/validation splits of a token stream;
- `BigramLM` counts bigrams with add-k smoothing (Jurafsky & Martin, ch. 3);
- `KneserNeyLM` is the interpolated Kneser–Ney n-gram model (Kneser & Ney, 1995;
  Chen & Goodman, 1999), from `kneser_ney_counts` and `kneser_ney_prob`;
- `WindowLM` is the fixed-window feed-forward neural LM of Bengio et al. (2003),
  without the direct input-to-output connections of the paper;
- `next_token_loss` is the cross-entropy of a sequence model's next-token
  predictions.

The chapter's word embeddings (word2vec's skip-gram) are in `word2vec`.

Shapes use `b` batch, `t` time, `d` width, `v` vocabulary.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.validate import (
    check_ids,
    check_int,
    check_number,
    check_sizes,
    check_type,
    describe,
)


def _as_id(i) -> int:
    """An int read from `i` without rounding (an int, a numpy int, a 0-d integer
    tensor)."""
    try:
        if isinstance(i, bool):
            raise TypeError
        return operator.index(i)
    except TypeError:
        raise TypeError(f"ids must be int token ids; got {describe(i)}") from None


class Vocab:
    """A bijection between symbols and ids `0..len-1`, most frequent symbols first.

    >>> v = Vocab("hello")
    >>> v.decode(v.encode("hole"))
    'hole'
    """

    def __init__(
        self, symbols: Iterable[str], *, min_count: int = 1, unk: str | None = None
    ):
        if not isinstance(symbols, Iterable) or isinstance(symbols, torch.Tensor):
            raise TypeError(
                f"symbols must be a str or a list of str; got {describe(symbols)}"
            )
        check_int(min_count, "min_count", 1)
        if unk is not None and not isinstance(unk, str):
            raise TypeError(f"unk must be a str or None; got {describe(unk)}")
        counts = Counter(symbols)
        if not all(isinstance(s, str) for s in counts):
            bad = next(s for s in counts if not isinstance(s, str))
            raise TypeError(
                f"symbols must be str (characters or words); got {describe(bad)}"
            )
        kept = sorted(
            (s for s, c in counts.items() if c >= min_count),
            key=lambda s: (-counts[s], s),
        )
        if unk is not None:
            kept = [unk] + [s for s in kept if s != unk]
        if not kept:
            raise ValueError("cannot build a vocabulary from no symbols")
        self.itos: list[str] = kept
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(kept)}
        self.counts = counts
        self.unk = unk
        self.of_words = any(len(s) != 1 for s in kept if s != unk)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, symbols: Iterable[str]) -> torch.Tensor:
        """Ids of `symbols` as a LongTensor `(t,)`; unknown symbols map to
        `unk`."""
        if isinstance(symbols, str) and self.of_words:
            raise TypeError(
                f"symbols must be a list of words for this word "
                f"vocabulary; got a str, which would be read as "
                f"characters: {symbols[:20]!r}"
            )
        if self.unk is None:
            try:
                return torch.tensor([self.stoi[s] for s in symbols], dtype=torch.long)
            except KeyError as err:
                raise KeyError(
                    f"symbol {err.args[0]!r} is not in the vocabulary and "
                    "there is no unknown symbol"
                ) from None
        u = self.stoi[self.unk]
        return torch.tensor([self.stoi.get(s, u) for s in symbols], dtype=torch.long)

    def decode(self, ids: Iterable[int] | torch.Tensor, sep: str = "") -> str:
        """The symbols of `ids` joined with `sep` (`""` for characters, `" "`
        for words)."""
        if not isinstance(ids, torch.Tensor):
            if isinstance(ids, str) or not isinstance(ids, Iterable):
                raise TypeError(
                    f"ids must be a 1-D tensor or a list of int ids; got "
                    f"{describe(ids)}"
                )
            ids = torch.tensor([_as_id(i) for i in ids], dtype=torch.long)
        check_ids(ids, "ids", dims=1, vocab_size=len(self), min_len=0)
        return sep.join(self.itos[i] for i in ids.tolist())


def words(text: str) -> list[str]:
    """Lower-cased words and punctuation marks:
    `"Don't stop!"` → `["don't", "stop", "!"]`."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {describe(text)}")
    return re.findall(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[^\sa-z0-9]", text.lower())


def split_ids(
    ids: torch.Tensor, val_fraction: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a token stream into a training part and the last `val_fraction` for
    validation.

    The split is contiguous, not random: neighbouring windows overlap, so a random split
    would leak validation text into training.
    """
    check_ids(ids, "ids", dims=1, min_len=2)
    check_number(val_fraction, "val_fraction", 0.0, 1.0, low_open=True)
    if val_fraction == 1:
        raise ValueError("val_fraction must be < 1, leaving tokens for training; got 1")
    n_val = max(1, int(len(ids) * val_fraction))
    return ids[:-n_val], ids[-n_val:]


def random_windows(
    ids: torch.Tensor,
    batch_size: int,
    length: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch_size` random windows of a token stream and the same windows shifted by
    one.

    Shapes: ids `(t,)` → x, y `(b, length)` with `y[:, i] = x[:, i + 1]` in the
    stream.
    """
    check_ids(ids, "ids", dims=1)
    check_sizes(batch_size=batch_size, length=length)
    if len(ids) <= length:
        raise ValueError(
            f"the stream ({len(ids)} tokens) must be longer than a window ({length})"
        )
    starts = torch.randint(0, len(ids) - length, (batch_size,), generator=generator)
    offsets = torch.arange(length)
    x = ids[starts[:, None] + offsets]
    y = ids[starts[:, None] + offsets + 1]
    return x, y


def check_context_windows(ids, context) -> None:
    """The arguments of `context_windows`."""
    check_ids(ids, "ids", dims=1)
    check_int(context, "context", 1)
    if len(ids) <= context:
        raise ValueError(
            f"the stream ({len(ids)} tokens) must be longer than the context"
        )


def context_windows(
    ids: torch.Tensor, context: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each window x of `context` tokens and the token y after it: t - context pairs."""
    check_context_windows(ids, context)
    windows = ids.unfold(0, context + 1, 1)  # (t - context, context + 1), a view
    return windows[:, :-1], windows[:, -1]


def check_bigram_lm(vocab_size, k) -> None:
    """The arguments of `BigramLM`."""
    check_int(vocab_size, "vocab_size", 1)
    check_number(k, "the smoothing constant k", 0.0)


class BigramLM:
    """Add-k bigram model `P(j | i) = (N_ij + k) / (N_i + k·V)`; `k = 0` is the MLE."""

    def __init__(self, vocab_size: int, k: float = 1.0):
        check_bigram_lm(vocab_size, k)
        self.vocab_size, self.k = vocab_size, k
        self.counts = torch.zeros(vocab_size, vocab_size)

    def fit(self, ids: torch.Tensor) -> "BigramLM":
        """Count the bigrams of a token stream `(t,)`."""
        check_ids(ids, "ids", dims=1, vocab_size=self.vocab_size, min_len=2)
        self.counts = torch.zeros(self.vocab_size, self.vocab_size)
        self.counts.index_put_(
            (ids[:-1], ids[1:]), torch.ones(len(ids) - 1), accumulate=True
        )
        return self

    @property
    def probs(self) -> torch.Tensor:
        """The (v, v) matrix of `P(next = column | previous = row)`; rows sum to 1."""
        smoothed = self.counts + self.k
        total = smoothed.sum(dim=1, keepdim=True)
        # k = 0: a context never seen in training gets probability 0 everywhere
        return torch.where(total > 0, smoothed / total.clamp_min(1e-30), 0.0)

    def nll(self, ids: torch.Tensor) -> float:
        """Mean negative log-likelihood (nats per token) of a stream's bigrams."""
        check_ids(ids, "ids", dims=1, vocab_size=self.vocab_size, min_len=2)
        prev, nxt = ids[:-1], ids[1:]
        total = self.counts.sum(dim=1)[prev] + self.k * self.vocab_size
        p = torch.where(
            total > 0, (self.counts[prev, nxt] + self.k) / total.clamp_min(1e-30), 0.0
        )
        return -p.log().mean().item()


def check_kneser_ney_lm(vocab_size, order, discount) -> None:
    """The arguments of `KneserNeyLM` and `kneser_ney_counts`."""
    check_int(vocab_size, "vocab_size", 1)
    check_int(order, "order", 1)
    if discount is not None:
        check_number(discount, "the discount D", 0.0, 1.0, low_open=True)
    if vocab_size**order >= 2**62:
        raise ValueError(
            f"vocab_size**order must be below 2**62 (an n-gram is one int64 code); "
            f"got {vocab_size}**{order}"
        )


def ngram_codes(grams: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Each row of `grams` as one int64, its tokens the digits in base `vocab_size`."""
    check_ids(grams, "grams", dims=2, vocab_size=vocab_size, min_len=0)
    powers = vocab_size ** torch.arange(grams.shape[1] - 1, -1, -1)
    return (grams * powers.to(grams.device)).sum(1)


def check_lookup(keys, values, queries) -> None:
    """The arguments of `lookup` (the order of `keys` is not checked)."""
    for name, t in (("keys", keys), ("queries", queries)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != 1:
            raise TypeError(f"{name} must be a 1-D int64 tensor; got {describe(t)}")
    if not isinstance(values, torch.Tensor) or values.shape != keys.shape:
        raise ValueError(
            f"values must be a tensor of the shape of keys, {tuple(keys.shape)}; got "
            f"{describe(values)}"
        )


def lookup(keys: torch.Tensor, values: torch.Tensor, queries: torch.Tensor):
    """`values[i]` where `keys[i] == query` (keys sorted); 0 for a query not in keys."""
    check_lookup(keys, values, queries)
    if len(keys) == 0:
        return torch.zeros(len(queries), dtype=values.dtype)
    i = torch.searchsorted(keys, queries).clamp_max(len(keys) - 1)
    return torch.where(keys[i] == queries, values[i], 0).to(values.dtype)


def check_kneser_ney_counts(ids, order, vocab_size, discount) -> None:
    """The arguments of `kneser_ney_counts`."""
    check_kneser_ney_lm(vocab_size, order, discount)
    check_ids(ids, "ids", dims=1, vocab_size=vocab_size, min_len=order)


@dataclass
class KneserNeyLevel:
    """The counts of one order `k` of a Kneser–Ney model, as sorted int64 codes."""

    grams: torch.Tensor  # (g,) the k-grams (h, w) with a count > 0
    counts: torch.Tensor  # (g,) float64 c(h w): raw at the top order, else N1+(. h w)
    contexts: torch.Tensor  # (c,) their contexts h (k - 1 tokens)
    totals: torch.Tensor  # (c,) float64 c(h .), the sum of c(h w) over w
    types: torch.Tensor  # (c,) float64 N1+(h .), how many different w follow h
    discount: float  # D


def kneser_ney_counts(
    ids: torch.Tensor, order: int, vocab_size: int, discount: float | None = None
) -> list[KneserNeyLevel]:
    """Kneser–Ney counts per order, lowest first: raw at `order`, continuation below."""
    check_kneser_ney_counts(ids, order, vocab_size, discount)
    levels = []
    grams = ngram_codes(ids.unfold(0, order, 1), vocab_size)  # every n-gram, repeated
    for k in range(order, 0, -1):
        if k < order:  # the distinct (k+1)-grams, cut to their last k tokens
            grams = grams % vocab_size**k
        grams, counts = grams.unique(return_counts=True)  # sorted
        contexts, which = (grams // vocab_size).unique(return_inverse=True)
        n_contexts, counts = len(contexts), counts.double()
        totals = torch.zeros(n_contexts, dtype=torch.float64).index_add_(
            0, which, counts
        )
        types = torch.bincount(which, minlength=n_contexts).double()
        n1, n2 = (counts == 1).sum().item(), (counts == 2).sum().item()
        d = discount if discount is not None else n1 / (n1 + 2 * n2) if n1 else 0.5
        levels.append(KneserNeyLevel(grams, counts, contexts, totals, types, d))
    return levels[::-1]


def check_kneser_ney_prob(levels, grams, vocab_size) -> None:
    """The arguments of `kneser_ney_prob`."""
    check_type(levels, "levels", list, "a list of KneserNeyLevel (kneser_ney_counts)")
    for level in levels:
        check_type(level, "each level", KneserNeyLevel, "a KneserNeyLevel")
    check_ids(grams, "grams", dims=2, vocab_size=vocab_size, min_len=0)
    if not 1 <= grams.shape[1] <= len(levels):
        raise ValueError(
            f"grams must be rows (context, next token) of 1..{len(levels)} tokens, the "
            f"model's order; got shape {tuple(grams.shape)}"
        )


def kneser_ney_prob(
    levels: list[KneserNeyLevel], grams: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """Interpolated Kneser–Ney `P(w | h)` per row `(h, w)`; short rows use lower orders.
    Shapes: grams (N, m) ids, 1 <= m <= order -> (N,) float64."""
    check_kneser_ney_prob(levels, grams, vocab_size)
    p = torch.full((len(grams),), 1 / vocab_size, dtype=torch.float64)  # order 0
    for k in range(1, grams.shape[1] + 1):  # up from the unigram
        level = levels[k - 1]
        code = ngram_codes(grams[:, grams.shape[1] - k :], vocab_size)  # (h, w)
        context = code // vocab_size  # h
        count = lookup(level.grams, level.counts, code)
        total = lookup(level.contexts, level.totals, context)
        types = lookup(level.contexts, level.types, context)
        d = level.discount
        mixed = ((count - d).clamp_min(0) + d * types * p) / total.clamp_min(1)
        p = torch.where(total > 0, mixed, p)  # an unseen context: order k - 1 alone
    return p


class KneserNeyLM:
    """An interpolated Kneser–Ney model of `order` n: the next token given the last
    n - 1, from `kneser_ney_counts` and `kneser_ney_prob`.

    Every context, seen or not, gets a distribution over all `vocab_size` tokens.
    """

    def __init__(self, vocab_size: int, order: int, discount: float | None = None):
        check_kneser_ney_lm(vocab_size, order, discount)
        self.vocab_size, self.order, self.discount = vocab_size, order, discount
        self.levels: list[KneserNeyLevel] | None = None

    def fit(self, ids: torch.Tensor) -> "KneserNeyLM":
        """Count the n-grams of a token stream `(t,)`."""
        self.levels = kneser_ney_counts(ids, self.order, self.vocab_size, self.discount)
        return self

    def _fitted(self) -> list[KneserNeyLevel]:
        if self.levels is None:
            raise ValueError("the KneserNeyLM has no counts: call fit(ids) first")
        return self.levels

    def probs(self, context: torch.Tensor) -> torch.Tensor:
        """`P(next = w | the last order - 1 tokens of context)` for every `w`.

        Shapes: context `(t,)` ids, any `t >= 0` → `(v,)` float64, summing to 1.
        """
        levels = self._fitted()
        check_ids(context, "context", dims=1, vocab_size=self.vocab_size, min_len=0)
        h = context[max(0, len(context) - (self.order - 1)) :]
        rows = torch.cat(
            [h.expand(self.vocab_size, -1), torch.arange(self.vocab_size)[:, None]], 1
        )
        return kneser_ney_prob(levels, rows, self.vocab_size)

    def nll(self, ids: torch.Tensor) -> float:
        """Mean negative log-likelihood (nats per token) of the tokens of a stream that
        follow `order - 1` others."""
        levels = self._fitted()
        check_ids(ids, "ids", dims=1, vocab_size=self.vocab_size, min_len=self.order)
        p = kneser_ney_prob(levels, ids.unfold(0, self.order, 1), self.vocab_size)
        return -p.log().mean().item()


def check_window_lm_input(model, x) -> None:
    """The ids given to `WindowLM.forward`: `(b, context)`."""
    check_ids(x, "x", dims=2, vocab_size=model.embed.num_embeddings)
    if x.shape[1] != model.context:
        raise ValueError(
            f"x must be (batch, {model.context}) token ids; got {tuple(x.shape)}"
        )


class WindowLM(nn.Module):
    """Fixed-window neural LM: embed the last `context` tokens, concatenate, tanh."""

    def __init__(self, vocab_size: int, context: int, d_embed: int, d_hidden: int):
        super().__init__()
        check_sizes(
            vocab_size=vocab_size, context=context, d_embed=d_embed, d_hidden=d_hidden
        )
        self.context = context
        self.embed = nn.Embedding(vocab_size, d_embed)
        self.hidden = nn.Linear(context * d_embed, d_hidden)
        self.out = nn.Linear(d_hidden, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_window_lm_input(self, x)
        e = self.embed(x)  # (b, context, d_embed)
        h = torch.tanh(self.hidden(e.flatten(1)))  # (b, d_hidden): window concatenated
        return self.out(h)  # (b, v)


def check_lm_batch(batch) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch` must be a pair `(x, y)` whose `y` holds `(b, t)` integer token ids;
    returns it."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(
            f"batch must be a pair (x, y); got {type(batch).__name__}"
            + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else "")
        )
    check_ids(batch[1], "batch's y", dims=2, min_len=0)
    return batch[0], batch[1]


def check_lm_logits(logits, y: torch.Tensor) -> None:
    """`model(x)` must give logits `(b, t, v)` that match `y`."""
    if (
        not isinstance(logits, torch.Tensor)
        or logits.dim() != 3
        or logits.shape[:2] != y.shape
    ):
        got = (
            f"shape {tuple(logits.shape)}"
            if isinstance(logits, torch.Tensor)
            else type(logits).__name__
        )
        raise ValueError(
            f"model(x) must return logits (b, t, v) = "
            f"({y.shape[0]}, {y.shape[1]}, v) to match y; got {got}"
        )


def next_token_loss(
    model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]
) -> torch.Tensor:
    """Mean cross-entropy of a language model's next-token predictions on
    `batch = (x, y)`.

    `y` holds the token that follows each position of `x` (as `random_windows`
    makes).

    Shapes: x `(b, t)`, y `(b, t)` integer ids, `model(x)` `(b, t, v)` → scalar.
    """
    x, y = check_lm_batch(batch)
    logits = model(x)
    check_lm_logits(logits, y)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())
