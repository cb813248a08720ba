"""Chapter 5: attention, a differentiable soft lookup of values by query–key similarity.

`attention(q, K, V) = Σ_i softmax_i(score(q, k_i)) · v_i` in three steps: a score per
key → `masked_softmax` (masked keys get weight exactly 0) → the weighted sum
(`attend`); `lookup` runs all three.

Scores (queries `q`, keys `k`):

- `DotScore` `q·k` (Luong et al., 2015, arXiv:1508.04025, "dot"): no
  parameters, needs `d_q = d_k`;
- `BilinearScore` `q^T W k` (Luong et al., "general"): `d_q·d_k` parameters;
- `AdditiveScore` `u^T tanh(W_1 k + W_2 q)` (Bahdanau, Cho and Bengio, 2015,
  arXiv:1409.0473): a one-hidden-layer network on every query–key pair.

`AttentionDecoder` is a GRU decoder that attends over the encoder states with its
current state `s_t` and predicts from `[s_t; c_t]`, the arrangement of Luong et al.
(2015) without input feeding. Bahdanau et al. query with `s_{t-1}` and feed `c_t`
into the recurrence, which forces a loop over target steps even in training; this order
lets the GRU run over all teacher-forced steps at once. It plugs into
`seq2seq.Seq2Seq` like `seq2seq.Decoder`.

Masks, here and in every later chapter: a bool tensor, True = may attend, always 3-D
`(b, t, s)`, where `b` may be 1 (one mask for the whole batch, e.g. causal) and
`t` may be 1 (one mask for every query, i.e. key padding). `check_mask` enforces
it.

Shapes use `b` batch, `t` queries (target positions), `s` keys (source positions),
`d` width, `v` vocabulary, `l` layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from einops import einsum, rearrange, repeat
from torch import nn

from lecturelib.recurrence import seq2seq
from lecturelib.validate import (
    check_callable,
    check_ids,
    check_on_device,
    check_sizes,
    check_tensor,
    check_type,
)
from lecturelib.recurrence.translation import PAD_ID

SCORES = ("dot", "bilinear", "additive")


def check_qk(
    q: torch.Tensor, k: torch.Tensor, d_q: int | None = None, d_k: int | None = None
) -> None:
    """Raise unless queries are float `(b, t, d_q)` and keys float `(b, s, d_k)`."""
    check_tensor(q, "queries", "(b, t, d_q)")
    check_tensor(k, "keys", "(b, s, d_k)")
    if q.dim() != 3 or k.dim() != 3 or q.shape[0] != k.shape[0]:
        raise ValueError(
            f"queries must be (b, t, d_q) and keys (b, s, d_k) with one "
            f"b; got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if d_q is not None and q.shape[-1] != d_q or d_k is not None and k.shape[-1] != d_k:
        raise ValueError(
            f"expected d_q={d_q}, d_k={d_k}; got queries {tuple(q.shape)} "
            f"and keys {tuple(k.shape)}"
        )


def check_dot_score(q, k) -> None:
    """The queries and keys of `DotScore`: one width `d`."""
    check_qk(q, k)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"a dot-product score needs d_q == d_k; got queries "
            f"{tuple(q.shape)} and keys {tuple(k.shape)}"
        )


class DotScore(nn.Module):
    """Dot-product score `q·k`, no parameters: (b, t, d), (b, s, d) -> (b, t, s)."""

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_dot_score(q, k)
        return einsum(q, k, "b t d, b s d -> b t s")


class BilinearScore(nn.Module):
    """Bilinear score `q^T W k`: q (b, t, d_q), k (b, s, d_k) -> (b, t, s)."""

    def __init__(self, d_q: int, d_k: int):
        super().__init__()
        check_sizes(d_q=d_q, d_k=d_k)
        self.W = nn.Parameter(torch.randn(d_q, d_k) / d_q**0.5)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_qk(q, k, *self.W.shape)
        return einsum(q, self.W, k, "b t e, e d, b s d -> b t s")


class AdditiveScore(nn.Module):
    """Additive score `u^T tanh(W_1 k + W_2 q)` with hidden width `d_att`."""

    def __init__(self, d_q: int, d_k: int, d_att: int):
        super().__init__()
        check_sizes(d_q=d_q, d_k=d_k, d_att=d_att)
        self.d_q, self.d_k = d_q, d_k
        self.W1 = nn.Linear(d_k, d_att, bias=False)
        self.W2 = nn.Linear(d_q, d_att)
        self.u = nn.Linear(d_att, 1, bias=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        check_qk(q, k, self.d_q, self.d_k)
        keys = rearrange(self.W1(k), "b s a -> b 1 s a")
        queries = rearrange(self.W2(q), "b t a -> b t 1 a")
        hidden = torch.tanh(keys + queries)  # (b, t, s, d_att): every pair
        return self.u(hidden).squeeze(-1)  # (b, t, s)


def make_score(kind: str, d_q: int, d_k: int, d_att: int | None = None) -> nn.Module:
    """One of the three score functions by name (`"dot"` needs `d_q == d_k`)."""
    check_sizes(d_q=d_q, d_k=d_k)
    if kind == "dot":
        if d_q != d_k:
            raise ValueError(
                f"a dot-product score needs d_q == d_k; got {d_q} and {d_k}"
            )
        return DotScore()
    if kind == "bilinear":
        return BilinearScore(d_q, d_k)
    if kind == "additive":
        return AdditiveScore(d_q, d_k, d_att or d_q)
    raise ValueError(f"score must be one of {SCORES}; got {kind!r}")


def check_mask(mask, b: int, t: int, s: int, name: str = "mask") -> None:
    """Raise unless `mask` is a bool `(b, t, s)` tensor in which `b` and `t` may
    be 1: the mask convention of the whole package.

    Shapes: mask `(b, t, s)`, `(1, t, s)`, `(b, 1, s)` or `(1, 1, s)`.
    """
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a bool tensor (True = may attend); got {got}")
    expected = f"(b, t, s) = ({b}, {t}, {s}), where b and t may be 1"
    if mask.dim() == 2:
        raise ValueError(
            f"{name} must be 3-D {expected}; "
            f"got the 2-D {tuple(mask.shape)}: "
            f"write mask[None] for a (t, s) mask, mask[:, None, :] for a "
            f"(b, s) padding mask"
        )
    if (
        mask.dim() != 3
        or mask.shape[0] not in (1, b)
        or mask.shape[1] not in (1, t)
        or mask.shape[2] != s
    ):
        raise ValueError(f"{name} must be {expected}; got {tuple(mask.shape)}")


def check_masked_softmax(scores, mask) -> None:
    """The arguments of `masked_softmax`: a key to attend to in every row."""
    check_tensor(scores, "scores", "(..., s)")
    if mask is None:
        return
    if scores.dim() < 3:
        raise ValueError(
            f"scores must be (b, ..., t, s) when a mask is given; got "
            f"{tuple(scores.shape)}"
        )
    check_mask(mask, scores.shape[0], *scores.shape[-2:])
    check_on_device(
        mask.any(-1).all(),
        "mask: every query needs at least one key that is not masked; "
        "got a row of mask that is all False",
    )


def masked_softmax(
    scores: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Softmax over the last axis (keys); keys where `mask` is False get weight 0.
    Shapes: scores (b, ..., t, s), mask (b|1, t|1, s) -> (b, ..., t, s)."""
    check_masked_softmax(scores, mask)
    if mask is None:
        return F.softmax(scores, -1)
    mask = mask.view(mask.shape[0], *[1] * (scores.dim() - 3), *mask.shape[1:])
    return F.softmax(scores.masked_fill(~mask, float("-inf")), -1)  # exp(-inf) = 0


def check_attend(scores, values) -> None:
    """The scores and values of `attend` (its mask: `masked_softmax`)."""
    check_tensor(values, "values", "(b, s, d_v)")
    if (
        not isinstance(scores, torch.Tensor)
        or scores.dim() != 3
        or values.dim() != 3
        or scores.shape[::2] != values.shape[:2]
    ):
        raise ValueError(
            f"scores must be (b, t, s) and values (b, s, d_v); got "
            f"{tuple(getattr(scores, 'shape', ()))} and "
            f"{tuple(values.shape)}"
        )


def attend(
    scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None
):
    """`(α V, α)` with `α = masked_softmax(scores, mask)`; values (b, s, d_v)."""
    check_attend(scores, values)
    weights = masked_softmax(scores, mask)
    return einsum(weights, values, "b t s, b s d -> b t d"), weights


def lookup(q, k, v, score: nn.Module, mask: torch.Tensor | None = None):
    """`attend(score(q, k), v, mask)`: context (b, t, d_v), weights (b, t, s)."""
    check_callable(score, "score")
    return attend(score(q, k), v, mask)


@dataclass(kw_only=True)
class AttentionConfig(seq2seq.Seq2SeqConfig):
    """The sizes of chapter 4's encoder–decoder (`seq2seq.Seq2SeqConfig`) and the
    score function of its attention decoder, one of `SCORES`."""

    score: str = "additive"

    def __post_init__(self):
        super().__post_init__()
        if self.score not in SCORES:
            raise ValueError(
                f"AttentionConfig: score must be one of {SCORES}; got {self.score!r}"
            )
        if self.score == "dot" and self.d_enc != self.d_model:
            raise ValueError(
                f"AttentionConfig: a dot-product score needs d_q == d_k, "
                f"but the decoder's d_model={self.d_model} queries "
                f"encoder states of width {self.d_enc} (bidirectional); "
                f"got score='dot' with bidirectional=True"
            )


def check_attention_decoder_input(dec, tgt_in, enc, h) -> None:
    """The arguments of `AttentionDecoder.forward` (shapes: its docstring)."""
    check_ids(tgt_in, "tgt_in", dims=2, vocab_size=dec.vocab_size)
    if not isinstance(enc, seq2seq.Encoded):
        raise TypeError(f"enc must be a seq2seq.Encoded; got {type(enc).__name__}")
    b = tgt_in.shape[0]
    if (
        enc.states.dim() != 3
        or enc.states.shape[0] != b
        or enc.states.shape[2] != dec.d_enc
    ):
        raise ValueError(
            f"enc.states must be (b, s, d_enc) = "
            f"({b}, s, {dec.d_enc}); got {tuple(enc.states.shape)}"
        )
    if h is not None and (
        not isinstance(h, torch.Tensor) or h.shape != (dec.n_layers, b, dec.d_model)
    ):
        got = tuple(h.shape) if isinstance(h, torch.Tensor) else type(h).__name__
        raise ValueError(
            f"h must be (l, b, d_model) = ({dec.n_layers}, {b}, "
            f"{dec.d_model}) or None; got {got}"
        )


class AttentionDecoder(nn.Module):
    """GRU decoder that attends with its state `s_t` and predicts from `[s_t; c_t]`."""

    def __init__(self, config: AttentionConfig):
        super().__init__()
        check_type(config, "config", AttentionConfig, "an AttentionConfig")
        d_emb, d_model, d_enc = config.d_emb, config.d_model, config.d_enc
        self.vocab_size, self.n_layers = config.tgt_vocab_size, config.n_layers
        self.d_model, self.d_enc = d_model, d_enc
        self.embed = nn.Embedding(self.vocab_size, d_emb, padding_idx=PAD_ID)
        self.bridge = nn.Linear(d_enc, d_model)
        self.rnn = nn.GRU(d_emb, d_model, self.n_layers, batch_first=True)
        self.score = make_score(config.score, d_model, d_enc)
        self.combine = nn.Linear(d_model + d_enc, d_emb)
        self.readout = nn.Linear(d_emb, self.vocab_size)

    def init_state(self, enc: seq2seq.Encoded) -> torch.Tensor:
        h0 = torch.tanh(self.bridge(enc.context))  # (b, d_model)
        return repeat(h0, "b d -> l b d", l=self.n_layers)  # (l, b, d_model)

    def forward(
        self, tgt_in: torch.Tensor, enc: seq2seq.Encoded, h: torch.Tensor | None = None
    ):
        check_attention_decoder_input(self, tgt_in, enc, h)
        h = self.init_state(enc) if h is None else h
        s, h = self.rnn(self.embed(tgt_in), h)  # (b, t, d_model)
        scores = self.score(s, enc.states)  # (b, t, s)
        keep = enc.mask[:, None, :]  # (b, 1, s)
        c, weights = attend(scores, enc.states, keep)  # (b, t, d_enc)
        out = torch.tanh(self.combine(torch.cat([s, c], -1)))  # (b, t, d_emb)
        return self.readout(out), h, weights  # (b, t, v)


def make_model(config: AttentionConfig) -> seq2seq.Seq2Seq:
    """The chapter's encoder–decoder with attention (the encoder of
    `seq2seq.make_model`)."""
    if not isinstance(config, AttentionConfig):
        raise TypeError(
            f"config must be an AttentionConfig; got {type(config).__name__}"
        )
    return seq2seq.Seq2Seq(seq2seq.Encoder(config), AttentionDecoder(config))
