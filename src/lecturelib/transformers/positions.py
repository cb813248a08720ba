"""Chapter 7: positions. Attention treats its keys as a set; these are the ways to tell
it where each token is.

Absolute positions, added to the token embeddings:

- `sinusoidal` (Vaswani et al., 2017, arXiv:1706.03762):
  `PE(pos, 2i) = sin(pos/10000^{2i/d})`, `PE(pos, 2i+1) = cos(pos/10000^{2i/d})`;
  `shift_matrix` is the rotation `M_k` with `PE(pos + k) = M_k PE(pos)` for
  every `pos`;
- `LearnedPositions`: one trained vector per position `0..max_len-1`.

`score_terms` splits `(x_m + p_m)·(x_n + p_n)` into content, position and cross
terms.

Relative positions, inside attention:

- `RelativeAttention` (Shaw, Uszkoreit and Vaswani, 2018, arXiv:1803.02155):
  learned vectors for the clipped distance `clip(j - i, -k, k)` added to the keys and
  the values; one table shared by all heads of a layer, as in the paper;
- `alibi_slopes`, `alibi_bias` (Press, Smith and Lewis, 2022,
  arXiv:2108.12409): a fixed penalty `-m_h |i - j|` on the scores, with a geometric
  sequence of slopes;
- RoPE (Su et al., 2021, arXiv:2104.09864): `rope_rotate` turns each pair of
  dimensions `(2i, 2i+1)` of a query or key at position `m` by `m θ_i`,
  `θ_i = base^{-2i/d}` (`i` from 0), with the rotation formula; `rope_complex`
  does the same as a complex multiplication; `Rotary` plugs into
  `self_attention.MultiHeadAttention(rotary=...)`. Pairs are adjacent dimensions as in
  the paper; many codebases pair dimension `i` with `i + d/2` instead, which is the
  same rotation of permuted dimensions.

`SCHEMES` names the six ways of the chapter's extrapolation experiment
(`positional_lm`).

Shapes use `b` batch, `t` query positions, `s` key positions, `d` width, `h`
heads, `v` vocabulary.
"""

from __future__ import annotations

import math

import torch
from einops import einsum
from torch import nn

from lecturelib.transformers.self_attention import (
    MultiHeadAttention,
    scaled_dot_product,
)
from lecturelib import validate
from lecturelib.validate import check_sizes, check_tensor

SCHEMES = ("none", "sinusoidal", "learned", "shaw", "alibi", "rope")


def check_even(d: int, what: str = "d_model") -> None:
    """`d` (named `what`) must be a positive even int."""
    if isinstance(d, bool) or not isinstance(d, int) or d < 2 or d % 2:
        raise ValueError(
            f"{what} must be a positive even int (dimensions come in pairs); got {d!r}"
        )


def check_base(base: float) -> None:
    """The base of the frequencies must be a finite number > 1."""
    if (
        isinstance(base, bool)
        or not isinstance(base, (int, float))
        or not math.isfinite(base)
        or base <= 1
    ):
        raise ValueError(
            f"base must be a finite number > 1 (frequencies base^(-2i/d) "
            f"from 1 down to 1/base); got {base!r}"
        )


def check_frequencies(d: int, base: float, what: str = "d") -> None:
    """The arguments of `frequencies`: an even width `d` (named `what`) and
    a base > 1."""
    check_even(d, what)
    check_base(base)


def frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """Frequencies `ω_i = base^{-2i/d}`, `i = 0..d/2-1`, of sines and RoPE; float64."""
    check_frequencies(d, base)
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def sinusoidal(seq_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """`PE[pos, 2i] = sin(pos ω_i)`, `PE[pos, 2i+1] = cos(pos ω_i)`."""
    check_sizes(seq_len=seq_len)
    pos = torch.arange(seq_len, dtype=torch.float64)[:, None]  # (t, 1)
    angles = pos * frequencies(d_model, base)  # (t, d/2)
    pe = torch.stack([angles.sin(), angles.cos()], -1)  # (t, d/2, 2)
    return pe.flatten(1).float()  # (t, d): sin, cos, ...


def check_shift_matrix(k, d_model, base) -> None:
    """The arguments of `shift_matrix`: a shift `k` of any sign."""
    validate.check_int(k, "k", -math.inf)
    check_frequencies(d_model, base, "d_model")


def shift_matrix(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The block-diagonal `M_k` with `PE(pos + k) = M_k PE(pos)` for every `pos`."""
    check_shift_matrix(k, d_model, base)
    angle = k * frequencies(d_model, base)
    c, s = angle.cos(), angle.sin()
    blocks = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)
    return torch.block_diag(*blocks).float()  # (d, d)


def check_embeddings(x, d_model: int) -> None:
    """Embeddings `x` `(b, t, d_model)` to which positions are added."""
    check_tensor(x, "x", f"(b, t, {d_model})")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            f"x must be (b, t, d_model) = (b, t, {d_model}); got {tuple(x.shape)}"
        )


class SinusoidalPositions(nn.Module):
    """Adds `sinusoidal` encodings to the embeddings; defined for any length."""

    def __init__(self, d_model: int, base: float = 10000.0):
        super().__init__()
        check_frequencies(d_model, base, "d_model")
        self.d_model, self.base = d_model, base

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_embeddings(x, self.d_model)
        return x + sinusoidal(x.shape[1], self.d_model, self.base).to(x.device, x.dtype)


def check_learned_input(x, d_model: int, max_len: int, clamp: bool) -> None:
    """The input of `LearnedPositions`: no longer than its table unless
    `clamp`."""
    check_embeddings(x, d_model)
    if x.shape[1] > max_len and not clamp:
        raise ValueError(
            f"learned positions exist for 0..{max_len - 1} only; "
            f"got a sequence of {x.shape[1]} "
            f"(pass clamp=True to reuse the last one)"
        )


class LearnedPositions(nn.Module):
    """Adds a trained vector per position; `clamp=True` reuses the last past max_len."""

    def __init__(self, max_len: int, d_model: int, clamp: bool = False):
        super().__init__()
        check_sizes(max_len=max_len, d_model=d_model)
        self.max_len, self.clamp, self.d_model = max_len, clamp, d_model
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_learned_input(x, self.d_model, self.max_len, self.clamp)
        pos = torch.arange(x.shape[1], device=x.device).clamp(max=self.max_len - 1)
        return x + self.table(pos)


def check_score_terms(x, p, W_q, W_k) -> None:
    """The arguments of `score_terms`."""
    check_tensor(x, "x", "(..., t, d)")
    check_tensor(p, "p", "(t, d)")
    if x.dim() < 2 or x.shape[-2:] != p.shape:
        raise ValueError(
            f"x must be (..., t, d) and p (t, d) with one t and d; got "
            f"{tuple(x.shape)} and {tuple(p.shape)}"
        )
    for name, W in (("W_q", W_q), ("W_k", W_k)):
        if W is not None and (
            not isinstance(W, torch.Tensor) or W.dim() != 2 or W.shape[1] != x.shape[-1]
        ):
            got = tuple(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__
            raise ValueError(
                f"{name} must be (d_k, d) = (d_k, {x.shape[-1]}); got {got}"
            )
    if W_q is not None and W_k is not None and W_q.shape != W_k.shape:
        raise ValueError(
            f"W_q and W_k must have one shape (d_k, d); got "
            f"{tuple(W_q.shape)} and {tuple(W_k.shape)}"
        )


def score_terms(
    x: torch.Tensor,
    p: torch.Tensor,
    W_q: torch.Tensor | None = None,
    W_k: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The four terms of `q_m·k_n`, `q = W_q(x + p)`, `k = W_k(x + p)`, summing to it.
    Shapes: x `(..., t, d)`, p `(t, d)`, W_q, W_k `(d_k, d)` → four `(..., t, t)`."""
    check_score_terms(x, p, W_q, W_k)
    eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
    W_q, W_k = (eye if W_q is None else W_q), (eye if W_k is None else W_k)

    def dot(a, b):
        return einsum(a @ W_q.T, b @ W_k.T, "... m e, ... n e -> ... m n")

    position = dot(p, p).expand(*x.shape[:-1], x.shape[-2])  # the same for every x
    return {
        "content": dot(x, x),
        "content-position": dot(x, p),
        "position-content": dot(p, x),
        "position": position,
    }


def check_keys_cover_queries(t, s) -> None:
    """`t` queries, the last `t` of `s >= t` key positions (fewer keys would put
    the first queries at negative positions)."""
    check_sizes(t=t, s=s)
    if s < t:
        raise ValueError(
            f"s (keys) must be >= t (queries): the t queries are the last t of the s "
            f"positions; got t={t}, s={s}"
        )


def check_relative_distances(t, s, max_distance) -> None:
    """The arguments of `relative_distances`."""
    check_keys_cover_queries(t, s)
    check_sizes(max_distance=max_distance)


def relative_distances(
    t: int, s: int | None = None, max_distance: int = 16, device=None
) -> torch.Tensor:
    """`clip(j - i, -k, k) + k` (t, s), query `i` at position `i + s - t`, key `j`."""
    s = t if s is None else s
    check_relative_distances(t, s, max_distance)
    i = torch.arange(t, device=device)[:, None] + (s - t)
    j = torch.arange(s, device=device)[None, :]
    return (j - i).clamp(-max_distance, max_distance) + max_distance


class RelativeAttention(MultiHeadAttention):
    """Shaw's learned vectors of `clip(j - i, -k, k)` on keys and values."""

    def __init__(
        self, d_model: int, n_heads: int, max_distance=16, bias=True, dropout=0.0
    ):
        super().__init__(d_model, n_heads, bias, dropout)
        check_sizes(max_distance=max_distance)
        self.max_distance = max_distance
        self.rel_k = nn.Embedding(2 * max_distance + 1, self.d_head)
        self.rel_v = nn.Embedding(2 * max_distance + 1, self.d_head)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ):
        q, k, v = self.project(x, context)  # (b, h, t|s, d_h)
        dist = relative_distances(
            q.shape[2], k.shape[2], self.max_distance, x.device
        )  # (t, s)
        a_k, a_v = self.rel_k(dist), self.rel_v(dist)  # (t, s, d_h)
        rel = einsum(q, a_k, "b h t e, t s e -> b h t s") / math.sqrt(self.d_head)
        heads, weights = scaled_dot_product(
            q, k, v, mask, rel if bias is None else rel + bias
        )
        heads = heads + einsum(weights, a_v, "b h t s, t s e -> b h t e")
        return self.merge_heads(heads), weights  # (b, t, d)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's slopes: `2^{-8/n}, 2^{-16/n}, ..., 2^{-8}` for `n` a power of two."""
    check_sizes(n_heads=n_heads)

    def power_of_two(n):
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    m = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two(m) + power_of_two(2 * m)[::2][: n_heads - m]
    return torch.tensor(slopes)


def alibi_bias(n_heads: int, t: int, s: int | None = None, device=None) -> torch.Tensor:
    """ALiBi's `-m_h |i - j|`: (h, t, s), query `i` at position `i + s - t`, key `j`."""
    s = t if s is None else s
    check_keys_cover_queries(t, s)
    i = torch.arange(t, device=device)[:, None] + (s - t)
    j = torch.arange(s, device=device)[None, :]
    return -alibi_slopes(n_heads).to(device)[:, None, None] * (i - j).abs()


def check_rope_angles(t, offset) -> None:
    """The arguments of `rope_angles`: `t` positions from `offset` on."""
    validate.check_int(t, "t", 1)
    validate.check_int(offset, "offset (the position of the first query)", 0)


def rope_angles(
    t: int,
    d_head: int,
    base: float = 10000.0,
    offset: int = 0,
    device=None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """`m θ_i` at positions `m = offset..offset+t-1`, float64, returned in `dtype`."""
    check_rope_angles(t, offset)
    m = torch.arange(offset, offset + t, dtype=torch.float64)
    return (m[:, None] * frequencies(d_head, base)).to(device=device, dtype=dtype)


def check_rope_input(x, angles) -> None:
    """The arguments of `rope_rotate` and `rope_complex`."""
    check_tensor(x, "x", "(..., t, d)")
    check_tensor(angles, "angles", "(t, d/2)")
    if (
        x.dim() < 2
        or angles.dim() != 2
        or x.shape[-1] != 2 * angles.shape[-1]
        or x.shape[-2] != angles.shape[0]
    ):
        raise ValueError(
            f"x must be (..., t, d) and angles (t, d/2); "
            f"got {tuple(x.shape)} and {tuple(angles.shape)}"
        )


def rope_rotate(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each pair `(x_{2i}, x_{2i+1})` at position `m` by `angles[m, i]`."""
    check_rope_input(x, angles)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., t, d/2) each
    cos, sin = angles.cos(), angles.sin()
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


def rope_complex(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """`rope_rotate` in complex numbers: `(x_{2i} + i x_{2i+1}) e^{i angles[m, i]}`."""
    check_rope_input(x, angles)
    real = torch.float64 if x.dtype == torch.float64 else torch.float32  # complex64/128
    z = torch.view_as_complex(x.to(real).reshape(*x.shape[:-1], -1, 2).contiguous())
    angles = angles.to(real)
    rotated = z * torch.polar(torch.ones_like(angles), angles)  # e^{i m θ}
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


def check_rotary_input(x, d_head: int) -> None:
    """The queries or keys `(..., t, d_head)` that `Rotary` rotates."""
    check_tensor(x, "x", f"(..., t, {d_head})")
    if x.dim() < 2 or x.shape[-1] != d_head:
        raise ValueError(
            f"x must be (..., t, d_head) = (..., t, {d_head}); got {tuple(x.shape)}"
        )


class Rotary(nn.Module):
    """RoPE as `MultiHeadAttention`'s `rotary`, at positions `offset..offset+t-1`."""

    def __init__(self, d_head: int, base: float = 10000.0):
        super().__init__()
        check_frequencies(d_head, base, "d_head")
        self.d_head, self.base = d_head, base

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        check_rotary_input(x, self.d_head)
        angles = rope_angles(
            x.shape[-2],
            self.d_head,
            self.base,
            offset,
            x.device,
            dtype=torch.float64 if x.dtype == torch.float64 else torch.float32,
        )
        return rope_rotate(x, angles)
