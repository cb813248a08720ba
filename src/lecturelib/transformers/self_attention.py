"""Chapter 6: self-attention, chapter 5's soft lookup with queries, keys and values all
computed from one sequence.

`scaled_dot_product` is `softmax(QK^T/√d_k + B) V` (Vaswani et al., 2017,
arXiv:1706.03762) on any axes between batch and time (heads), with a boolean mask
(True = may attend; `causal_mask`, `padding_mask`) and an optional additive
score bias `B` (ALiBi, relative positions). `MultiHeadAttention` projects to
`h` heads of width `d/h`, attends in every head at once, concatenates and applies
`W_O`;
`from_torch` copies the weights of a `torch.nn.MultiheadAttention` into it, so
the two can be compared. `order_mask` generalises the causal mask to any
generation order (XLNet); `dot_product_statistics` is the √d_k experiment;
`neighbour_retrieval` and `SetAttention` are the chapter's set task and its
one-layer model.

Masks follow `attention.check_mask`: bool, True = may attend, `(b, t, s)` where
`b` and `t` may be 1; `causal_mask` is `(1, t, s)`, `padding_mask`
`(b, 1, s)`, and they combine with `&`. `MultiHeadAttention` adds the head
axis itself.

Shapes use `b` batch, `t` queries, `s` keys, `d` width, `h` heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from torch import nn

from lecturelib.recurrence.attention import masked_softmax
from lecturelib.validate import (
    check_callable,
    check_ids,
    check_int,
    check_number,
    check_on_device,
    check_sizes,
    check_tensor,
    check_type,
    describe,
)


def check_scaled_dot_product(q, k, v, bias=None, scale=None) -> None:
    """The arguments of `scaled_dot_product` (the mask is checked by
    `attention.masked_softmax`)."""
    check_tensor(q, "q", "(..., t, d_k)")
    check_tensor(k, "k", "(..., s, d_k)")
    check_tensor(v, "v", "(..., s, d_v)")
    if (
        q.dim() < 2
        or q.dim() != k.dim()
        or k.dim() != v.dim()
        or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
    ):
        raise ValueError(
            f"q, k, v must be (..., t, d_k), (..., s, d_k), (..., s, d_v) "
            f"with the same leading axes; got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"q and k need one d_k, k and v one number of keys s; got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if scale is not None:
        check_number(scale, "scale", 0, low_open=True)
    if bias is not None:
        scores = (*q.shape[:-1], k.shape[-2])
        check_tensor(bias, "bias", f"broadcastable to the scores {scores}")
        try:
            grows = torch.broadcast_shapes(bias.shape, scores) != scores
        except RuntimeError:
            grows = True
        if grows:
            raise ValueError(
                f"bias must broadcast to the scores (..., t, s) = "
                f"{scores}; got {tuple(bias.shape)}"
            )


def scaled_dot_product(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
):
    """`softmax(q kᵀ · scale + bias) v` and the weights (0 where `mask` is False).
    Shapes: q `(b, *, t, d)`, k, v `(b, *, s, d)`, mask `(b, t, s)` → `(b, *, t, d)`."""
    check_scaled_dot_product(q, k, v, bias, scale)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = einsum(q, k, "... t d, ... s d -> ... t s") * scale
    if bias is not None:
        scores = scores + bias
    weights = masked_softmax(scores, mask)
    return einsum(weights, v, "... t s, ... s d -> ... t d"), weights


def check_causal_mask(t, s) -> None:
    """The arguments of `causal_mask`."""
    check_int(t, "t", 1)
    check_int(s, "s", 1)
    if s < t:
        raise ValueError(
            f"need 1 <= t <= s (queries are the last t of s positions); "
            f"got t={t}, s={s}"
        )


def causal_mask(t: int, s: int | None = None, device=None) -> torch.Tensor:
    """True where query `i` (at position `i + s - t`) may attend key `j <= i + s - t`.
    Shapes: → `(1, t, s)` bool."""
    s = t if s is None else s
    check_causal_mask(t, s)
    i = torch.arange(t, device=device)[:, None] + (s - t)
    j = torch.arange(s, device=device)[None, :]
    return (j <= i)[None]  # (1, t, s)


def check_padding_mask(lengths, s) -> None:
    """The arguments of `padding_mask`."""
    if (
        not isinstance(lengths, torch.Tensor)
        or lengths.dtype.is_floating_point
        or lengths.is_complex()
        or lengths.dtype == torch.bool
    ):
        raise TypeError(
            f"lengths must be a 1-d integer tensor (b,); got {describe(lengths)}"
        )
    if lengths.dim() != 1:
        raise ValueError(
            f"lengths must be a 1-d integer tensor (b,); got shape "
            f"{tuple(lengths.shape)}"
        )
    at_least_one = "lengths must be at least 1 (a sequence needs a key to attend to)"
    if len(lengths) and lengths.device.type != "cpu":  # checked where the lengths are
        check_on_device(lengths.min() >= 1, at_least_one)
        if s is not None:
            check_int(s, "s", 1)
            check_on_device(lengths.max() <= s, f"s must be >= every length; got {s}")
        return
    if len(lengths) == 0 or lengths.min() < 1:
        raise ValueError(f"{at_least_one}; got {lengths.tolist()}")
    if s is not None:
        check_int(s, "s", int(lengths.max()))


def padding_mask(lengths: torch.Tensor, s: int | None = None) -> torch.Tensor:
    """(b, 1, s) bool, True at each sequence's real keys; `s` default: max(lengths)."""
    check_padding_mask(lengths, s)
    s = int(lengths.max()) if s is None else s
    keep = torch.arange(s, device=lengths.device)[None, :] < lengths[:, None]
    return keep[:, None, :]  # (b, 1, s)


def check_dropout(p) -> None:
    """A dropout probability: a number in `[0, 1)`."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise ValueError(f"dropout must be a number in [0, 1); got {describe(p)}")


def check_multi_head_attention(d_model, n_heads, dropout, rotary) -> None:
    """The arguments of `MultiHeadAttention`."""
    check_sizes(d_model=d_model, n_heads=n_heads)
    if d_model % n_heads:
        raise ValueError(
            f"d_model must be divisible by n_heads; got {d_model} and {n_heads}"
        )
    check_dropout(dropout)
    if rotary is not None:
        check_callable(rotary, "rotary")


def check_attention_input(x, context, d_model: int) -> None:
    """The queries' input `x` `(b, t, d)` and the keys' `context` `(b, s, d)`
    of `MultiHeadAttention`."""
    check_tensor(x, "x", f"(b, t, {d_model})")
    check_tensor(context, "context", f"(b, s, {d_model})")
    if (
        x.dim() != 3
        or context.dim() != 3
        or x.shape[-1] != d_model
        or context.shape[-1] != d_model
        or x.shape[0] != context.shape[0]
    ):
        raise ValueError(
            f"x and context must be (b, t, {d_model}) and "
            f"(b, s, {d_model}); got {tuple(x.shape)} and "
            f"{tuple(context.shape)}"
        )


def check_heads(heads, n_heads: int, d_head: int) -> None:
    """The heads `(b, h, t, d_h)` that `MultiHeadAttention.merge_heads`
    concatenates."""
    check_tensor(heads, "heads", "(b, h, t, d_h)")
    if heads.dim() != 4 or heads.shape[1] != n_heads or heads.shape[3] != d_head:
        raise ValueError(
            f"heads must be (b, h, t, d_h) = (b, {n_heads}, t, "
            f"{d_head}); got {tuple(heads.shape)}"
        )


class MultiHeadAttention(nn.Module):
    """Multi-head attention (`h` heads of width `d/h`), one bool mask `(b, t, s)`.
    Shapes: x `(b, t, d)`, context `(b, s, d)` → `(b, t, d)`, weights `(b, h, t, s)`."""

    def __init__(self, d_model: int, n_heads: int, bias=True, dropout=0.0, rotary=None):
        super().__init__()
        check_multi_head_attention(d_model, n_heads, dropout, rotary)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.rotary = rotary  # rotates q and k (RoPE, chapter 7), or None

    def project(self, x: torch.Tensor, context: torch.Tensor | None = None):
        """Per-head q `(b, h, t, d_h)` from `x`, k, v from `context` (default `x`)."""
        context = x if context is None else context
        check_attention_input(x, context, self.d_model)
        q, k, v = (
            rearrange(W(a), "b t (h e) -> b h t e", h=self.n_heads)
            for W, a in ((self.W_q, x), (self.W_k, context), (self.W_v, context))
        )
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        return q, k, v

    def merge_heads(self, heads: torch.Tensor) -> torch.Tensor:
        """`concat_h(head_h) W_O`: `(b, h, t, d_h)` → `(b, t, d)`."""
        check_heads(heads, self.n_heads, self.d_head)
        return self.W_o(self.dropout(rearrange(heads, "b h t e -> b t (h e)")))

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ):
        q, k, v = self.project(x, context)  # (b, h, t|s, d_h)
        heads, weights = scaled_dot_product(q, k, v, mask, bias)  # (b, h, t, d_h)
        return self.merge_heads(heads), weights  # (b, t, d)


def check_from_torch(mha) -> None:
    """The argument of `from_torch`."""
    check_type(mha, "mha", nn.MultiheadAttention, "an nn.MultiheadAttention")
    if not mha.batch_first or not mha._qkv_same_embed_dim:
        raise ValueError(
            "expected nn.MultiheadAttention(..., batch_first=True) with "
            "kdim = vdim = embed_dim"
        )


def from_torch(mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """`MultiHeadAttention` with a `batch_first` `nn.MultiheadAttention`'s weights."""
    check_from_torch(mha)
    has_bias = mha.in_proj_bias is not None
    ours = MultiHeadAttention(mha.embed_dim, mha.num_heads, bias=has_bias)
    with torch.no_grad():
        for i, lin in enumerate((ours.W_q, ours.W_k, ours.W_v)):
            lin.weight.copy_(mha.in_proj_weight.chunk(3)[i])
            if has_bias:
                lin.bias.copy_(mha.in_proj_bias.chunk(3)[i])
        ours.W_o.weight.copy_(mha.out_proj.weight)
        if has_bias:
            ours.W_o.bias.copy_(mha.out_proj.bias)
    return ours


def check_order(order) -> None:
    """The argument of `order_mask`: a permutation of `0..t-1`."""
    if (
        not isinstance(order, torch.Tensor)
        or order.is_floating_point()
        or order.is_complex()
        or order.dtype == torch.bool
    ):
        raise TypeError(
            f"order must be an integer tensor (t,) of positions; got {describe(order)}"
        )
    t = order.numel()
    if (
        order.dim() != 1
        or t == 0
        or not torch.equal(order.sort().values, torch.arange(t, device=order.device))
    ):
        raise ValueError(
            f"order must be a 1-d integer permutation of 0..t-1; got "
            f"{order.dtype} {order.tolist()}"
        )


def order_mask(order: torch.Tensor) -> torch.Tensor:
    """The causal mask `(1, t, t)` of an order: step `r` makes position `order[r]`."""
    check_order(order)
    t = order.numel()
    rank = torch.empty_like(order)
    rank[order] = torch.arange(t, device=order.device)  # the step that writes each i
    return (rank[None, :] <= rank[:, None])[None]  # (1, t, t)


def dot_product_statistics(
    d_k: int, scaled: bool, n_keys: int = 64, n: int = 1000, seed: int = 0
) -> dict[str, float]:
    """One N(0, I) query, `n_keys` keys, `n` times, scores `q·k` (`/√d_k` if `scaled`):
    `q·k`'s variance, mean entropy (nats), share of max weight > 0.99, grad norm."""
    check_sizes(d_k=d_k, n_keys=n_keys, n=n)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, 1, d_k, generator=g)
    k = torch.randn(n, n_keys, d_k, generator=g)
    dots = einsum(q, k, "n t d, n s d -> n t s")  # (n, 1, n_keys)
    scores = (dots * d_k**-0.5 if scaled else dots).requires_grad_()
    weights = F.softmax(scores, -1)
    (weights * torch.randn(n, 1, n_keys, generator=g)).sum().backward()
    return {
        "variance": dots.var().item(),
        "entropy": -torch.xlogy(weights, weights).sum(-1).mean().item(),
        "saturated": (weights.max(-1).values > 0.99).float().mean().item(),
        "grad_norm": scores.grad.norm(dim=-1).median().item(),
    }


def check_neighbour_retrieval(n, n_items, n_values) -> None:
    """The arguments of `neighbour_retrieval`."""
    check_int(n, "n", 1)
    check_int(n_items, "n_items", 3)
    check_int(n_values, "n_values", 2)


def neighbour_retrieval(n: int, n_items: int, n_values: int = 16, seed: int = 0):
    """Items: keys a shuffled `0..n_items-1`, random values; targets: values of keys
    `key + 1`, `key - 1` (mod). Shapes: → `(n, n_items)` twice, `(n, n_items, 2)`."""
    check_neighbour_retrieval(n, n_items, n_values)
    g = torch.Generator().manual_seed(seed)
    keys = torch.rand(n, n_items, generator=g).argsort(1)
    values = torch.randint(0, n_values, (n, n_items), generator=g)
    # by_key[:, k]: the value of the item with key k
    by_key = torch.empty_like(values).scatter_(1, keys, values)
    targets = [by_key.gather(1, (keys + shift) % n_items) for shift in (1, -1)]
    return keys, values, torch.stack(targets, -1)


def check_set_input(keys, values, n_keys: int, n_values: int) -> None:
    """The input of `SetAttention`: keys and values `(b, t)`."""
    check_ids(keys, "keys", 2, n_keys)
    check_ids(values, "values", 2, n_values)
    if keys.shape != values.shape:
        raise ValueError(
            f"keys and values must both be (b, t); "
            f"got {tuple(keys.shape)} and {tuple(values.shape)}"
        )


class SetAttention(nn.Module):
    """Items `E_key[key] + E_value[value]` (no positions) → attention → read-out."""

    def __init__(
        self, n_keys: int, n_values: int, d_model: int, n_heads: int, n_out: int = 2
    ):
        super().__init__()
        check_sizes(
            n_keys=n_keys,
            n_values=n_values,
            d_model=d_model,
            n_heads=n_heads,
            n_out=n_out,
        )
        self.n_keys, self.n_out, self.n_values = n_keys, n_out, n_values
        self.key_embed = nn.Embedding(n_keys, d_model)
        self.value_embed = nn.Embedding(n_values, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.readout = nn.Linear(d_model, n_out * n_values)

    def forward(self, keys: torch.Tensor, values: torch.Tensor):
        check_set_input(keys, values, self.n_keys, self.n_values)
        x = self.key_embed(keys) + self.value_embed(values)  # (b, t, d)
        out, weights = self.attn(x)  # (b, t, d)
        logits = rearrange(self.readout(out), "b t (o v) -> b t o v", o=self.n_out)
        return logits, weights
