"""Approximations of softmax attention that cost less than O(t²): kernels, projections
and sparse patterns.

- Linear attention (Katharopoulos et al., 2020, arXiv:2006.16236) replaces
  `exp(q·k)` by `φ(q)·φ(k)`; its causal form is an RNN whose state is the matrix
  `Σ φ(k) vᵀ`.
- Performer (Choromanski et al., 2021, arXiv:2009.14794) picks `φ` as positive random
  features whose dot product is an unbiased estimate of `exp(q·k)` (FAVOR+; the
  orthogonal draws and redrawing of the paper are left out).
- Linformer (Wang et al., 2020, arXiv:2006.04768) projects the `s` keys and values to
  `r` rows with learned `(r, s)` matrices (non-causal only).
- Sliding-window (Longformer, Beltagy et al., 2020, arXiv:2004.05150) and BigBird
(Zaheer et
  al., 2020, arXiv:2007.14062) masks keep O(t) entries of the score matrix; here they
  are applied to the full matrix, which shows their pattern and quality, not their
  speed.

Shapes: q `(..., t, d)`, k `(..., s, d)`, v `(..., s, d_v)`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.efficiency import flash
from lecturelib.validate import (
    check_bool,
    check_callable,
    check_choice,
    check_ids,
    check_int,
    check_sizes,
    check_tensor,
    describe,
)


def check_linear_attention(q, k, v, feature, causal: bool = True) -> None:
    """The arguments of `linear_attention` and (`causal`, which needs `t = s`)
    `linear_attention_recurrent`."""
    flash.check_qkv(q, k, v)
    check_callable(feature, "feature")
    check_bool(causal, "causal")
    if k.shape[-2] < 1:
        raise ValueError(
            f"linear attention needs at least one key (with none its normaliser "
            f"φ(q)·Σφ(k) is 0); got k of shape {tuple(k.shape)}"
        )
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal linear attention needs t = s; got t={q.shape[-2]}, s={k.shape[-2]}"
        )


def elu_feature(x: torch.Tensor) -> torch.Tensor:
    """The feature map of Katharopoulos et al.: `φ(x) = elu(x) + 1 > 0`."""
    check_tensor(x, "x", "(..., d)")
    return F.elu(x) + 1


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    feature=elu_feature,
) -> torch.Tensor:
    """`φ(q) (φ(k)ᵀ v) / φ(q)·Σφ(k)`: linear in length; causal: running sums (s = t)."""
    check_linear_attention(q, k, v, feature, causal)
    # sums of features in float32, autocast off: float16 overflows them and rounds
    wide, dtype = torch.promote_types(v.dtype, torch.float32), v.dtype
    with torch.autocast(q.device.type, enabled=False):
        q, k, v = q.to(wide), k.to(wide), v.to(wide)
        fq, fk = feature(q), feature(k)  # (..., t|s, f)
        if causal:
            # (..., t, f, d_v)
            state = torch.einsum("...sf,...sd->...sfd", fk, v).cumsum(-3)
            norm = fk.cumsum(-2)  # (..., t, f)
            num = torch.einsum("...tf,...tfd->...td", fq, state)
            return (num / (fq * norm).sum(-1, keepdim=True)).to(dtype)
        state = fk.transpose(-2, -1) @ v  # (..., f, d_v)
        out = (fq @ state) / (fq @ fk.sum(-2, keepdim=True).transpose(-2, -1))
        return out.to(dtype)


def linear_attention_recurrent(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, feature=elu_feature
) -> torch.Tensor:
    """Causal linear attention as an RNN with state `S_t`, `z_t`: O(1) memory a step."""
    check_linear_attention(q, k, v, feature)
    wide, dtype = torch.promote_types(v.dtype, torch.float32), v.dtype  # sums: float32
    q, k, v = q.to(wide), k.to(wide), v.to(wide)
    fq, fk = feature(q), feature(k)
    state = q.new_zeros(q.shape[:-2] + (fk.shape[-1], v.shape[-1]))  # (..., f, d_v)
    z = q.new_zeros(q.shape[:-2] + (fk.shape[-1],))  # (..., f)
    outs = []
    for i in range(q.shape[-2]):
        state = state + fk[..., i, :, None] * v[..., i, None, :]
        z = z + fk[..., i, :]
        num = (fq[..., i, :, None] * state).sum(-2)  # (..., d_v)
        outs.append(num / (fq[..., i, :] * z).sum(-1, keepdim=True))
    return torch.stack(outs, -2).to(dtype)


def random_features(d: int, m: int, seed: int = 0) -> torch.Tensor:
    """`m` Gaussian directions `w ~ N(0, I_d)` for `performer_features`.

    Shapes: → `(m, d)`.
    """
    check_sizes(d=d, m=m)
    check_int(seed, "seed", 0)
    return torch.randn(m, d, generator=torch.Generator().manual_seed(seed))


def performer_features(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Positive random features `φ(x) = exp(w·x - |x|²/2) / √m` (FAVOR+), w (m, d)."""
    check_performer_features(x, w)
    w = w.to(x)
    proj = x @ w.T  # (..., t, m)
    return torch.exp(proj - (x * x).sum(-1, keepdim=True) / 2) / math.sqrt(w.shape[0])


def check_performer_features(x, w) -> None:
    """The arguments of `performer_features`: `x (..., d)`, `w (m, d)`."""
    check_tensor(x, "x", "(..., d)")
    if x.dim() < 1 or x.shape[-1] < 1:
        raise ValueError(f"x must be (..., d) with d >= 1; got {describe(x)}")
    check_tensor(w, "w", f"(m, d) with d = {x.shape[-1]}")
    if w.dim() != 2 or w.shape[1] != x.shape[-1]:
        raise ValueError(f"w must be (m, d) with d = {x.shape[-1]}; got {describe(w)}")
    if w.shape[0] < 1:
        raise ValueError(f"w must hold m >= 1 random features; got {describe(w)}")


def performer_attention(q, k, v, w: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """Softmax attention estimated with random features: linear attention with
    `φ = performer_features(· d^{-1/4}, w)`, so that `φ(q)·φ(k) ≈ exp(q·k/√d)`.

    Shapes: q `(..., t, d)`, k `(..., s, d)`, v `(..., s, d_v)`, w `(m, d)` →
    `(..., t, d_v)`.
    """
    check_performer_attention(q, k, v, w, causal)
    c = q.shape[-1] ** -0.25
    return linear_attention(q, k, v, causal, lambda x: performer_features(x * c, w))


def check_performer_attention(q, k, v, w, causal) -> None:
    """The arguments of `performer_attention`: those of `linear_attention`
    with `d >= 1` (the scale `d^{-1/4}`) and features `w (m, d)`."""
    check_linear_attention(q, k, v, performer_features, causal)
    if q.shape[-1] < 1:
        raise ValueError(
            f"q and k must have d >= 1 features (the scale is d^(-1/4)); got q of shape "
            f"{tuple(q.shape)}"
        )
    check_performer_features(q, w)


def linformer_attention(q, k, v, e: torch.Tensor, f: torch.Tensor | None = None):
    """Softmax attention over `r` projected keys and values `E k` and `F v`
    (`F = E` when not given): O(t r) instead of O(t s). Non-causal.

    Shapes: q `(..., t, d)`, k `(..., s, d)`, v `(..., s, d_v)`, e, f `(r, s)` →
    `(..., t, d_v)`.
    """
    flash.check_qkv(q, k, v)
    f = e if f is None else f
    for name, p in (("e", e), ("f", f)):
        check_tensor(p, name, f"(r, s) with s = {k.shape[-2]}")
        if p.dim() != 2 or p.shape[1] != k.shape[-2]:
            raise ValueError(
                f"{name} must be an (r, s) projection with s = {k.shape[-2]}; "
                f"got {describe(p)}"
            )
        if p.shape[0] < 1:
            raise ValueError(f"{name} must project to r >= 1 rows; got {describe(p)}")
    return flash.naive_attention(q, e.to(k) @ k, f.to(v) @ v)


def sliding_window_mask(t: int, window: int, causal: bool = True) -> torch.Tensor:
    """True where query `i` may attend key `j`: `i - window < j <= i` (causal) or
    `|i - j| < window`.

    Shapes: → `(t, t)` bool.
    """
    check_sizes(t=t, window=window)
    check_bool(causal, "causal")
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    keep = (i - j).abs() < window
    return keep & (j <= i) if causal else keep


def bigbird_mask(t: int, window: int, n_global: int, n_random: int, seed: int = 0):
    """BigBird's pattern: a sliding window of `window` keys on each side, `n_global`
    first positions that attend and are attended by all, and `n_random` random keys
    per query (non-causal).

    Shapes: → `(t, t)` bool.
    """
    check_sizes(t=t, window=window)
    check_int(n_global, "n_global", 0)
    check_int(n_random, "n_random", 0)
    check_int(seed, "seed", 0)
    if n_global > t or n_random > t:
        raise ValueError(
            f"n_global and n_random must be <= t = {t}; got {n_global}, {n_random}"
        )
    keep = sliding_window_mask(t, window, causal=False)
    keep[:n_global, :] = True
    keep[:, :n_global] = True
    g = torch.Generator().manual_seed(seed)
    picks = torch.rand(t, t, generator=g).argsort(-1)[:, :n_random]
    keep[torch.arange(t)[:, None], picks] = True
    return keep


VARIANTS = ("softmax", "sliding window", "bigbird", "linear", "performer", "linformer")


class RecallModel(nn.Module):
    """One attention layer that reads a set of (key, value) items and a query key and
    predicts the query's value: a long-range retrieval test for an attention `variant`
    of `VARIANTS`.

    Shapes: items `(b, n, 2)` (key, value ids), query `(b,)` → logits `(b,
    n_values)`.
    """

    def __init__(
        self,
        variant: str,
        n_items: int,
        n_keys: int,
        n_values: int,
        d_model: int = 64,
        window: int = 8,
        n_features: int = 64,
        rank: int = 16,
        seed: int = 0,
    ):
        super().__init__()
        check_choice(variant, "variant", VARIANTS)
        check_sizes(
            n_items=n_items,
            n_keys=n_keys,
            n_values=n_values,
            d_model=d_model,
            window=window,
            n_features=n_features,
            rank=rank,
        )
        check_int(seed, "seed", 0)
        self.variant, self.n_items, self.window = variant, n_items, window
        self.key = nn.Embedding(n_keys, d_model)
        self.value = nn.Embedding(n_values, d_model)
        self.q_proj, self.k_proj = (
            nn.Linear(d_model, d_model),
            nn.Linear(d_model, d_model),
        )
        self.v_proj = nn.Linear(d_model, d_model)
        self.head = nn.Linear(d_model, n_values)
        self.register_buffer("w", random_features(d_model, n_features, seed))
        self.proj = nn.Parameter(torch.randn(rank, n_items + 1) / math.sqrt(n_items))

    def attend(self, q, k, v):
        t, name = k.shape[-2], self.variant
        if name == "softmax":
            return flash.naive_attention(q, k, v)
        if name == "sliding window":
            mask = sliding_window_mask(t, self.window)
            return flash.naive_attention(q, k, v, mask=mask.to(q.device))
        if name == "bigbird":
            mask = bigbird_mask(t, self.window // 2, 1, self.window // 2)
            return flash.naive_attention(q, k, v, mask=mask.to(q.device))
        if name == "linear":
            return linear_attention(q, k, v)
        if name == "performer":
            return performer_attention(q, k, v, self.w)
        return linformer_attention(q, k, v, self.proj)

    def forward(self, items: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        check_recall_input(self, items, query)
        x = self.key(items[..., 0]) + self.value(items[..., 1])  # (b, n, d)
        x = torch.cat([x, self.key(query)[:, None]], 1)  # the query last
        out = self.attend(self.q_proj(x), self.k_proj(x), self.v_proj(x))
        return self.head(out[:, -1])  # (b, n_values)


def check_recall_input(model: RecallModel, items, query) -> None:
    """The input of `RecallModel`: items `(b, n_items, 2)`, each a key id and a
    value id of the model's, and one query key id per row `(b,)` (ids read once per
    call: an id out of range would stop a GPU with a device-side assert)."""
    n_keys, n_values = model.key.num_embeddings, model.value.num_embeddings
    check_ids(items, "items")
    if items.dim() != 3 or items.shape[1:] != (model.n_items, 2):
        raise ValueError(
            f"items must be (b, {model.n_items}, 2) integer ids; got {describe(items)}"
        )
    check_ids(items[..., 0], "items' keys", vocab_size=n_keys)
    check_ids(items[..., 1], "items' values", vocab_size=n_values)
    check_ids(query, "query", vocab_size=n_keys)
    if query.shape != items.shape[:1]:
        raise ValueError(
            f"query must be (b,) = ({len(items)},) key ids, one per row of items; got "
            f"shape {tuple(query.shape)}"
        )


def recall_batch(n: int, n_items: int, n_keys: int, n_values: int, seed: int = 0):
    """A batch of the retrieval task: `n_items` items with distinct keys of
    `0..n_keys-1` and random values; the query is one of the keys, the target its
    value.

    Shapes: → items `(n, n_items, 2)`, query `(n,)`, target `(n,)`.
    """
    check_sizes(n=n, n_items=n_items, n_values=n_values)
    check_int(n_keys, "n_keys", n_items)
    check_int(seed, "seed", 0)
    g = torch.Generator().manual_seed(seed)
    keys = torch.rand(n, n_keys, generator=g).argsort(1)[:, :n_items]
    values = torch.randint(0, n_values, (n, n_items), generator=g)
    pick = torch.randint(0, n_items, (n,), generator=g)
    rows = torch.arange(n)
    return torch.stack([keys, values], -1), keys[rows, pick], values[rows, pick]
