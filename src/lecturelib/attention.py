"""Chapter 5: attention, a differentiable soft lookup of values by query–key similarity.

``attention(q, K, V) = Σ_i softmax_i(score(q, k_i)) · v_i`` in three steps: a score per
key → :func:`masked_softmax` (padded keys get weight exactly 0) → the weighted sum
(:func:`attend`); :func:`lookup` runs all three.

Scores (queries ``q``, keys ``k``):

- :class:`DotScore` ``q·k`` (Luong et al., 2015, arXiv:1508.04025, "dot"): no
  parameters, needs ``d_q = d_k``;
- :class:`BilinearScore` ``q^T W k`` (Luong et al., "general"): ``d_q·d_k`` parameters;
- :class:`AdditiveScore` ``u^T tanh(W_1 k + W_2 q)`` (Bahdanau, Cho and Bengio, 2015,
  arXiv:1409.0473): a one-hidden-layer network on every query–key pair.

:class:`AttentionDecoder` is a GRU decoder that attends over the encoder states with its
current state ``s_t`` and predicts from ``[s_t; c_t]``, the arrangement of Luong et al.
(2015) without input feeding. Bahdanau et al. query with ``s_{t-1}`` and feed ``c_t`` into
the recurrence, which forces a loop over target steps even in training; this order lets
the GRU run over all teacher-forced steps at once. It plugs into ``seq2seq.Seq2Seq`` like
``seq2seq.Decoder``.

Chapter 6: self-attention. :func:`scaled_dot_product` is ``softmax(QK^T/√d_k + B) V`` on
any leading axes, with a boolean mask (True = may attend; :func:`causal_mask`,
:func:`padding_mask`) and an optional additive score bias ``B`` (ALiBi, relative
positions). :class:`MultiHeadAttention` projects to ``h`` heads of width ``d/h``, attends
in every head at once, concatenates and applies ``W_O``; :func:`from_torch` copies the
weights of a ``torch.nn.MultiheadAttention`` into it, so the two can be compared.
:func:`order_mask` generalises the causal mask to any generation order (XLNet);
:func:`dot_product_statistics` is the √d_k experiment; :func:`neighbour_retrieval` and
:class:`SetAttention` are the chapter's set task and its one-layer model.

Shapes use ``b`` batch, ``t`` queries (target positions), ``s`` keys (source positions),
``d`` width, ``h`` heads, ``v`` vocabulary, ``l`` layers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from collections.abc import Callable

from einops import einsum, rearrange, repeat
from torch import nn

from lecturelib import seq2seq
from lecturelib.translation import PAD_ID

SCORES = ("dot", "bilinear", "additive")


def check_qk(q: torch.Tensor, k: torch.Tensor, d_q: int | None = None,
              d_k: int | None = None) -> None:
    """Raise ValueError unless queries are ``(b, t, d_q)`` and keys ``(b, s, d_k)``."""
    if q.dim() != 3 or k.dim() != 3 or q.shape[0] != k.shape[0]:
        raise ValueError(f"queries must be (b, t, d_q) and keys (b, s, d_k) with one b; "
                         f"got {tuple(q.shape)} and {tuple(k.shape)}")
    if d_q is not None and q.shape[-1] != d_q or d_k is not None and k.shape[-1] != d_k:
        raise ValueError(f"expected d_q={d_q}, d_k={d_k}; got queries {tuple(q.shape)} "
                         f"and keys {tuple(k.shape)}")


class DotScore(nn.Module):
    """``score(q, k) = q·k``.

    Shapes: q ``(b, t, d)``, k ``(b, s, d)`` → ``(b, t, s)``.
    """

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_qk(q, k)
        if q.shape[-1] != k.shape[-1]:
            raise ValueError(f"a dot-product score needs d_q == d_k; got queries "
                             f"{tuple(q.shape)} and keys {tuple(k.shape)}")
        return einsum(q, k, "b t d, b s d -> b t s")


class BilinearScore(nn.Module):
    """``score(q, k) = q^T W k``.

    Shapes: q ``(b, t, d_q)``, k ``(b, s, d_k)`` → ``(b, t, s)``.
    """

    def __init__(self, d_q: int, d_k: int):
        super().__init__()
        self.W = nn.Parameter(torch.randn(d_q, d_k) / d_q**0.5)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_qk(q, k, *self.W.shape)
        return einsum(q, self.W, k, "b t e, e d, b s d -> b t s")


class AdditiveScore(nn.Module):
    """``score(q, k) = u^T tanh(W_1 k + W_2 q)`` with a hidden width ``d_att``.

    Shapes: q ``(b, t, d_q)``, k ``(b, s, d_k)`` → ``(b, t, s)``; the hidden layer is
    ``(b, t, s, d_att)``, the cost of this score's expressiveness.
    """

    def __init__(self, d_q: int, d_k: int, d_att: int):
        super().__init__()
        self.d_q, self.d_k = d_q, d_k
        self.W1 = nn.Linear(d_k, d_att, bias=False)
        self.W2 = nn.Linear(d_q, d_att)
        self.u = nn.Linear(d_att, 1, bias=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_qk(q, k, self.d_q, self.d_k)
        keys = rearrange(self.W1(k), "b s a -> b 1 s a")
        queries = rearrange(self.W2(q), "b t a -> b t 1 a")
        hidden = torch.tanh(keys + queries)       # (b, t, s, d_att): every pair
        return self.u(hidden).squeeze(-1)         # (b, t, s)


def make_score(kind: str, d_q: int, d_k: int, d_att: int | None = None) -> nn.Module:
    """One of the three score functions by name (``"dot"`` needs ``d_q == d_k``)."""
    if kind == "dot":
        if d_q != d_k:
            raise ValueError(f"a dot-product score needs d_q == d_k; got {d_q} and "
                             f"{d_k}")
        return DotScore()
    if kind == "bilinear":
        return BilinearScore(d_q, d_k)
    if kind == "additive":
        return AdditiveScore(d_q, d_k, d_att or d_q)
    raise ValueError(f"score must be one of {SCORES}; got {kind!r}")


def masked_softmax(scores: torch.Tensor,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis (the keys); keys with ``mask`` False get weight 0.

    Shapes: scores ``(..., s)``, mask broadcastable to it, e.g. ``(b, 1, s)``
    → ``(..., s)``.
    """
    if mask is None:
        return F.softmax(scores, -1)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool (True = attend); got {mask.dtype}")
    if not mask.any(-1).all():
        raise ValueError("every query needs at least one key that is not masked")
    return F.softmax(scores.masked_fill(~mask, float("-inf")), -1)  # exp(-inf) = 0


def attend(scores: torch.Tensor, values: torch.Tensor,
           mask: torch.Tensor | None = None):
    """Weights ``α = masked_softmax(scores)`` and the weighted sums ``c = α V``.

    Shapes: scores ``(b, t, s)``, values ``(b, s, d_v)``, mask ``(b, s)`` or None
    → context ``(b, t, d_v)``, weights ``(b, t, s)``.
    """
    if scores.dim() != 3 or values.dim() != 3 or scores.shape[::2] != values.shape[:2]:
        raise ValueError(f"scores must be (b, t, s) and values (b, s, d_v); got "
                         f"{tuple(scores.shape)} and {tuple(values.shape)}")
    if mask is not None and mask.shape != values.shape[:2]:
        raise ValueError(f"mask must be (b, s) = {tuple(values.shape[:2])}; got "
                         f"{tuple(mask.shape)}")
    weights = masked_softmax(scores, None if mask is None else mask[:, None, :])
    return einsum(weights, values, "b t s, b s d -> b t d"), weights


def lookup(q, k, v, score: nn.Module, mask: torch.Tensor | None = None):
    """The soft lookup: score the keys with the queries, then :func:`attend` to the
    values.

    Shapes: q ``(b, t, d_q)``, k ``(b, s, d_k)``, v ``(b, s, d_v)``, mask ``(b, s)``
    → context ``(b, t, d_v)``, weights ``(b, t, s)``.
    """
    return attend(score(q, k), v, mask)


class AttentionDecoder(nn.Module):
    """A GRU decoder with a new context ``c_t`` for every target step:
    ``s_t = GRU(E y_{t-1}, s_{t-1})``, ``α_t = softmax_i(score(s_t, h_i))``,
    ``c_t = Σ_i α_{t,i} h_i``, ``p(y_t | y_<t, x) = softmax(W_o tanh(W_c [s_t; c_t]))``.

    Shapes: tgt_in ``(b, t)``, enc (``seq2seq.Encoded``), h ``(l, b, d_model)`` or None
    → logits ``(b, t, v)``, h ``(l, b, d_model)``, weights ``(b, t, s)``.
    """

    def __init__(self, vocab_size: int, d_emb: int, d_model: int, d_enc: int,
                 n_layers: int = 1, score: str = "additive"):
        super().__init__()
        self.n_layers = n_layers
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD_ID)
        self.bridge = nn.Linear(d_enc, d_model)
        self.rnn = nn.GRU(d_emb, d_model, n_layers, batch_first=True)
        self.score = make_score(score, d_model, d_enc)
        self.combine = nn.Linear(d_model + d_enc, d_emb)
        self.readout = nn.Linear(d_emb, vocab_size)

    def init_state(self, enc: seq2seq.Encoded) -> torch.Tensor:
        h0 = torch.tanh(self.bridge(enc.context))                 # (b, d_model)
        return repeat(h0, "b d -> l b d", l=self.n_layers)       # (l, b, d_model)

    def forward(self, tgt_in: torch.Tensor, enc: seq2seq.Encoded,
                h: torch.Tensor | None = None):
        h = self.init_state(enc) if h is None else h
        s, h = self.rnn(self.embed(tgt_in), h)                    # (b, t, d_model)
        scores = self.score(s, enc.states)                        # (b, t, s)
        c, weights = attend(scores, enc.states, enc.mask)         # (b, t, d_enc)
        out = torch.tanh(self.combine(torch.cat([s, c], -1)))     # (b, t, d_emb)
        return self.readout(out), h, weights                      # (b, t, v)


def make_model(src_vocab_size: int, tgt_vocab_size: int, d_emb: int = 128,
               d_model: int = 256, n_layers: int = 1, bidirectional: bool = True,
               score: str = "additive", context: str = "last") -> seq2seq.Seq2Seq:
    """The chapter's encoder–decoder with attention (the encoder of
    ``seq2seq.make_model``)."""
    enc = seq2seq.Encoder(src_vocab_size, d_emb, d_model, n_layers, bidirectional,
                          context)
    dec = AttentionDecoder(tgt_vocab_size, d_emb, d_model, enc.d_enc, n_layers, score)
    return seq2seq.Seq2Seq(enc, dec)


def scaled_dot_product(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                       scale: float | None = None):
    """``softmax(q k^T · scale + bias) v`` with ``scale = 1/√d_k`` unless given; keys
    where ``mask`` is False get weight exactly 0.

    Shapes: q ``(..., t, d_k)``, k ``(..., s, d_k)``, v ``(..., s, d_v)``; mask (bool)
    and bias (float) broadcastable to ``(..., t, s)`` → out ``(..., t, d_v)``,
    weights ``(..., t, s)``.
    """
    if q.dim() < 2 or q.dim() != k.dim() or k.dim() != v.dim():
        raise ValueError(f"q, k, v must be (..., t, d_k), (..., s, d_k), (..., s, d_v) "
                         f"with the same leading axes; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"q and k need one d_k, k and v one number of keys s; got "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = einsum(q, k, "... t d, ... s d -> ... t s") * scale
    if bias is not None:
        scores = scores + bias
    weights = masked_softmax(scores, mask)
    return einsum(weights, v, "... t s, ... s d -> ... t d"), weights


def causal_mask(t: int, s: int | None = None, device=None) -> torch.Tensor:
    """True where query ``i`` may attend key ``j``: ``j <= i + (s - t)``, so with
    ``s = t`` (the default) every position sees itself and the past.

    Shapes: → ``(t, s)`` bool.
    """
    s = t if s is None else s
    if t < 1 or s < t:
        raise ValueError(f"need 1 <= t <= s (queries are the last t of s positions); "
                         f"got t={t}, s={s}")
    i = torch.arange(t, device=device)[:, None] + (s - t)
    j = torch.arange(s, device=device)[None, :]
    return j <= i


def padding_mask(lengths: torch.Tensor, s: int | None = None) -> torch.Tensor:
    """True for the real (non-padded) keys of each sequence.

    Shapes: lengths ``(b,)`` → ``(b, s)`` bool with ``s = max(lengths)`` by default.
    """
    if lengths.dim() != 1 or lengths.dtype.is_floating_point:
        raise ValueError(f"lengths must be a 1-d integer tensor; got {lengths.dtype} "
                         f"{tuple(lengths.shape)}")
    s = int(lengths.max()) if s is None else s
    return torch.arange(s, device=lengths.device)[None, :] < lengths[:, None]


class MultiHeadAttention(nn.Module):
    """``MHA(X_q, X_kv) = concat_h(attention(X_q W_Q^h, X_kv W_K^h, X_kv W_V^h)) W_O``
    with ``h`` heads of width ``d_h = d/h``: the same ``4d²`` weights as one head of
    width ``d``. ``rotary``, if given, rotates queries and keys per head (chapter 7).

    Shapes: x ``(b, t, d)``, context ``(b, s, d)`` (default: x, self-attention), mask
    bool broadcastable to ``(b, h, t, s)`` (True = may attend; a ``(t, s)`` causal mask
    or a ``(b, 1, 1, s)`` padding mask), bias broadcastable to ``(b, h, t, s)``
    → out ``(b, t, d)``, weights ``(b, h, t, s)``.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True,
                 dropout: float = 0.0,
                 rotary: Callable[[torch.Tensor], torch.Tensor] | None = None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model must be divisible by n_heads; got {d_model} and "
                             f"{n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.rotary = rotary

    def split(self, x: torch.Tensor) -> torch.Tensor:
        return rearrange(x, "b t (h e) -> b h t e", h=self.n_heads)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None,
                mask: torch.Tensor | None = None, bias: torch.Tensor | None = None):
        context = x if context is None else context
        if x.dim() != 3 or context.dim() != 3 or x.shape[-1] != self.d_model \
                or context.shape[-1] != self.d_model or x.shape[0] != context.shape[0]:
            raise ValueError(f"x and context must be (b, t, {self.d_model}) and "
                             f"(b, s, {self.d_model}); got {tuple(x.shape)} and "
                             f"{tuple(context.shape)}")
        q = self.split(self.W_q(x))                               # (b, h, t, d_h)
        k = self.split(self.W_k(context))                         # (b, h, s, d_h)
        v = self.split(self.W_v(context))                         # (b, h, s, d_h)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        out, weights = scaled_dot_product(q, k, v, mask, bias)
        out = self.dropout(rearrange(out, "b h t e -> b t (h e)"))
        return self.W_o(out), weights                             # (b, t, d)


def from_torch(mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """Our :class:`MultiHeadAttention` with the weights of a ``batch_first``
    ``nn.MultiheadAttention`` (whose fused ``in_proj_weight`` stacks W_Q, W_K, W_V)."""
    if not mha.batch_first or not mha._qkv_same_embed_dim:
        raise ValueError("expected nn.MultiheadAttention(..., batch_first=True) with "
                         "kdim = vdim = embed_dim")
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


# ------------------------------------------------ chapter 6: masks, experiments, a set task
def order_mask(order: torch.Tensor) -> torch.Tensor:
    """The causal mask of an arbitrary generation order: ``order[r]`` is the position
    generated at step ``r``, and position ``i`` may attend ``j`` when ``j`` is generated no
    later than ``i``. ``order = arange(t)`` gives :func:`causal_mask`.

    Shapes: order ``(t,)``, a permutation of ``0..t-1`` → ``(t, t)`` bool.
    """
    t = order.numel()
    if order.dim() != 1 or order.dtype.is_floating_point or not torch.equal(
            order.sort().values, torch.arange(t, device=order.device)):
        raise ValueError(f"order must be a permutation of 0..t-1; got {order.tolist()}")
    rank = torch.empty_like(order)
    rank[order] = torch.arange(t, device=order.device)       # the step that writes each i
    return rank[None, :] <= rank[:, None]


def dot_product_statistics(d_k: int, scaled: bool, n_keys: int = 64, n: int = 1000,
                           seed: int = 0) -> dict[str, float]:
    """One query against ``n_keys`` keys, all with independent N(0, 1) components, in
    ``n`` trials: the variance of ``q·k``, the mean entropy (nats) of the attention
    weights, the fraction of queries whose largest weight exceeds 0.99, and the median
    norm of the gradient, with respect to the scores, of a loss ``Σ_j u_j α_j`` with
    random ``u ~ N(0, I)``. Scores are ``q·k/√d_k`` if ``scaled``, else ``q·k``.
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, 1, d_k, generator=g)
    k = torch.randn(n, n_keys, d_k, generator=g)
    dots = einsum(q, k, "n t d, n s d -> n t s")                  # (n, 1, n_keys)
    scores = (dots * d_k**-0.5 if scaled else dots).requires_grad_()
    weights = F.softmax(scores, -1)
    (weights * torch.randn(n, 1, n_keys, generator=g)).sum().backward()
    return {"variance": dots.var().item(),
            "entropy": -torch.xlogy(weights, weights).sum(-1).mean().item(),
            "saturated": (weights.max(-1).values > 0.99).float().mean().item(),
            "grad_norm": scores.grad.norm(dim=-1).median().item()}


def neighbour_retrieval(n: int, n_items: int, n_values: int = 16, seed: int = 0):
    """A set of ``n_items`` items, each a key (a permutation of ``0..n_items-1``, so the
    items arrive in random order) and a random value; every item must output the values
    of the items with keys ``key + 1`` and ``key - 1`` (mod ``n_items``). The order of
    the items carries no information, so the task needs no positions.

    Shapes: → keys, values ``(n, n_items)``, targets ``(n, n_items, 2)`` (next, previous).
    """
    if n < 1 or n_items < 3 or n_values < 2:
        raise ValueError(f"need n >= 1, n_items >= 3, n_values >= 2; got {n}, {n_items}, "
                         f"{n_values}")
    g = torch.Generator().manual_seed(seed)
    keys = torch.rand(n, n_items, generator=g).argsort(1)
    values = torch.randint(0, n_values, (n, n_items), generator=g)
    by_key = torch.empty_like(values).scatter_(1, keys, values)  # by_key[:, k]: key k's value
    targets = [by_key.gather(1, (keys + shift) % n_items) for shift in (1, -1)]
    return keys, values, torch.stack(targets, -1)


class SetAttention(nn.Module):
    """Embed each item as ``E_key[key] + E_value[value]`` (no positions), one layer of
    :class:`MultiHeadAttention`, and a linear read-out of ``n_out`` values per item.

    Shapes: keys, values ``(b, t)`` → logits ``(b, t, n_out, n_values)``, weights
    ``(b, h, t, t)``.
    """

    def __init__(self, n_keys: int, n_values: int, d_model: int, n_heads: int,
                 n_out: int = 2):
        super().__init__()
        self.n_out, self.n_values = n_out, n_values
        self.key_embed = nn.Embedding(n_keys, d_model)
        self.value_embed = nn.Embedding(n_values, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.readout = nn.Linear(d_model, n_out * n_values)

    def forward(self, keys: torch.Tensor, values: torch.Tensor):
        x = self.key_embed(keys) + self.value_embed(values)          # (b, t, d)
        out, weights = self.attn(x)                                   # (b, t, d)
        logits = rearrange(self.readout(out), "b t (o v) -> b t o v", o=self.n_out)
        return logits, weights
