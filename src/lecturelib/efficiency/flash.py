"""Exact attention without the L×L matrix: online softmax, tiling and recomputation.

FlashAttention (Dao et al., 2022, arXiv:2205.14135; FlashAttention-2, Dao, 2023,
arXiv:2307.08691) computes softmax attention block by block, keeping for every query a
running maximum `m`, a running normaliser `l` and a rescaled output, so that the
scores are never stored whole; the backward pass recomputes them from the saved
log-sum-exp. The online softmax is Milakov & Gimelshein (2018, arXiv:1805.02867);
memory-efficient attention by chunking is Rabe & Staats (2021, arXiv:2112.05682).

This module is the plain-PyTorch version of the chapter: the loops over blocks run in
Python, each block is a batched matrix product over the batch and head axes. Masks are
boolean, True where a query may attend a key (as in
`lecturelib.transformers.self_attention`). `naive_attention` is the reference
and defines the semantics that every fast path here (tiled, Triton) follows:

- a query with no key to attend (every key masked, the causal queries before the first
  key when `s < t`, or `s = 0`) gets output 0, and no queries (`t = 0`) give an empty
  output;
- NaN in, NaN out: a NaN in a query, or in a key or value that the query attends, makes
  that query's output NaN (it is never turned into zeros); a NaN key that the mask hides
  from a query does not reach it.

Shapes: q `(..., t, d)`, k `(..., s, d)`, v `(..., s, d_v)` with the same leading
axes (e.g. `b h`).
"""

from __future__ import annotations

import math

import torch

from lecturelib.validate import (
    check_bool,
    check_int,
    check_sizes,
    check_tensor,
    check_type,
    describe,
    is_int,
)


def check_divisor(value, name: str, n: int, axis: str) -> None:
    """`value` must be an int >= 1 that divides `n`, the size of `axis`."""
    try:
        check_int(value, name, 1)
        ok = n % value == 0
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} must be a positive int that divides {axis} = {n}; got {value!r}"
        )


def check_softmax(x, block: int = 1) -> None:
    """The arguments of `safe_softmax` and `online_softmax`."""
    check_tensor(x, "x", "(..., n)")
    if x.dim() < 1:
        raise ValueError("x must be (..., n); got a 0-d tensor")
    if x.shape[-1] < 1:
        raise ValueError(
            f"x must be (..., n) with n >= 1 (a softmax over no entry is no "
            f"distribution); got shape {tuple(x.shape)}"
        )
    check_divisor(block, "block", x.shape[-1], "n")


def check_qkv(q, k, v) -> None:
    """Queries, keys and values `(..., t, d)`, `(..., s, d)`, `(..., s, d_v)`: float
    tensors of one dtype with the same leading axes."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_tensor(a, name, "(..., t, d)")
    if (
        q.dim() < 2
        or not q.dim() == k.dim() == v.dim()
        or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
        or q.shape[-1] != k.shape[-1]
        or k.shape[-2] != v.shape[-2]
    ):
        raise ValueError(
            f"q, k, v must be (..., t, d), (..., s, d), (..., s, d_v) with the "
            f"same leading axes; got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"q, k, v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}"
        )


def check_mask(mask, t: int, s: int) -> None:
    """`mask` must be None or a bool tensor ending in `(t, s)`."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() < 2:
        raise TypeError(f"mask must be a bool tensor (..., t, s); got {describe(mask)}")
    if mask.shape[-2:] != (t, s):
        raise ValueError(
            f"mask must end in (t, s) = ({t}, {s}); got {tuple(mask.shape)}"
        )


def check_blocks(t: int, s: int, block_q, block_k) -> None:
    """`block_q` must divide `t` and `block_k` divide `s`."""
    check_divisor(block_q, "block_q", t, "t")
    check_divisor(block_k, "block_k", s, "s")


def check_attention(q, k, v, mask=None, scale=None, block_q=None, block_k=None) -> None:
    """The arguments of `naive_attention`, and with the blocks of
    `tiled_forward` and `tiled_attention`."""
    check_qkv(q, k, v)
    check_mask(mask, q.shape[-2], k.shape[-2])
    if scale is not None and (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not (math.isfinite(scale) and scale > 0)
    ):
        raise ValueError(
            f"scale must be a positive finite number or None; got {scale!r}"
        )
    if block_q is not None or block_k is not None:
        check_blocks(q.shape[-2], k.shape[-2], block_q, block_k)


def check_visible(t, s, causal, mask, device) -> None:
    """The arguments of `visible`: sizes `t, s >= 0`, a bool, a mask as
    `check_mask` wants it and a device."""
    check_int(t, "t", 0)
    check_int(s, "s", 0)
    check_bool(causal, "causal")
    check_mask(mask, t, s)
    check_type(device, "device", (torch.device, str), "a torch.device or str")
    try:
        torch.device(device)
    except RuntimeError:
        raise ValueError(f"device must name a device; got {device!r}") from None


def visible(t: int, s: int, causal: bool, mask, device) -> torch.Tensor | None:
    """The bool (t, s) mask of visible keys (None: all); queries are the last t of s."""
    check_visible(t, s, causal, mask, device)
    keep = None
    if causal:
        i = torch.arange(t, device=device)[:, None] + (s - t)
        keep = torch.arange(s, device=device)[None, :] <= i
    if mask is not None:
        keep = mask if keep is None else keep & mask
    return keep


def safe_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis in three passes: the max, the sum, the division."""
    check_softmax(x)
    m = x.max(-1, keepdim=True).values  # pass 1: the maximum
    l = torch.exp(x - m).sum(-1, keepdim=True)  # pass 2: the normaliser
    return torch.exp(x - m) / l  # pass 3: the output


def online_softmax(x: torch.Tensor, block: int = 1) -> torch.Tensor:
    """Softmax over the last axis in two passes, a running max and sum per `block`."""
    check_softmax(x, block)
    m = torch.full(x.shape[:-1] + (1,), -math.inf, dtype=x.dtype, device=x.device)
    l = torch.zeros_like(m)
    for j in range(0, x.shape[-1], block):  # pass 1: m and l together
        xj = x[..., j : j + block]
        m_new = torch.maximum(m, xj.max(-1, keepdim=True).values)
        l = l * torch.exp(m - m_new) + torch.exp(xj - m_new).sum(-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / l  # pass 2: the output


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
):
    """Reference `softmax(q kᵀ · scale) v`; bool `mask` broadcasts to (..., t, s)."""
    check_attention(q, k, v, mask, scale)
    t, s = q.shape[-2], k.shape[-2]
    c = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * c  # (..., t, s)
    keep = visible(t, s, bool(causal), mask, q.device)
    if keep is not None:
        scores = scores.masked_fill(~keep, -math.inf)
    weights = torch.softmax(scores, -1)
    if keep is not None:  # a query with no key gets 0 (NaN from the inputs stays NaN)
        weights = weights.masked_fill(~keep.any(-1, keepdim=True), 0.0)
    return weights @ v


def tiled_forward(q, k, v, causal=False, mask=None, scale=None, block_q=64, block_k=64):
    """FlashAttention's forward: the output and each query's log-sum-exp `m + log l`.
    Shapes: q (..., t, d), k (..., s, d), v (..., s, d_v) -> (..., t, d_v), (..., t)."""
    check_attention(q, k, v, mask, scale, block_q, block_k)
    t, s = q.shape[-2], k.shape[-2]
    c = q.shape[-1] ** -0.5 if scale is None else scale
    empty_rows = mask is not None or (causal and s < t)  # rows that may see no key
    out = q.new_empty(q.shape[:-1] + v.shape[-1:])
    lse = q.new_empty(q.shape[:-1])
    for i in range(0, t, block_q):
        qi = q[..., i : i + block_q, :] * c  # (..., bq, d)
        m = q.new_full(qi.shape[:-1] + (1,), -math.inf)
        l = q.new_zeros(qi.shape[:-1] + (1,))
        o = q.new_zeros(qi.shape[:-1] + v.shape[-1:])  # (..., bq, d_v)
        last = i + block_q - 1 + (s - t)  # its last visible key
        for j in range(0, s, block_k):
            if causal and j > last:
                break  # above the diagonal
            sij = qi @ k[..., j : j + block_k, :].transpose(-2, -1)  # (..., bq, bk)
            keep = tile_mask(i, j, block_q, block_k, t, s, causal, mask, q.device)
            if keep is not None:
                sij = sij.masked_fill(~keep, -math.inf)
            m_new = torch.maximum(m, sij.amax(-1, keepdim=True))
            m_safe = m_new.nan_to_num(neginf=0.0) if empty_rows else m_new  # no key yet
            p = sij.sub_(m_safe).exp_()  # (..., bq, bk)
            alpha = (m - m_safe).exp_()  # rescales the past
            l = l.mul_(alpha).add_(p.sum(-1, keepdim=True))
            o = o.mul_(alpha).add_(p @ v[..., j : j + block_k, :])
            m = m_new
        out[..., i : i + block_q, :] = o / l.clamp_min(torch.finfo(l.dtype).tiny)
        lse[..., i : i + block_q] = (m + l.log()).squeeze(-1)
    return out, lse


def check_tile(i, j, bq, bk, t, s, causal, mask, device) -> None:
    """The arguments of `tile_mask`: the tile of `bq` queries from `i` and
    `bk` keys from `j` of the `(t, s)` scores, as `tiled_forward` walks them
    (blocks that divide t and s, tiles that start on a block), and the arguments of
    `visible` (a tile outside the scores would get a mask of the wrong size)."""
    check_visible(t, s, causal, mask, device)
    check_divisor(bq, "bq", t, "t")
    check_divisor(bk, "bk", s, "s")
    for name, start, block, n in (("i", i, bq, t), ("j", j, bk, s)):
        if not (is_int(start) and 0 <= start < n and start % block == 0):
            raise ValueError(
                f"{name} must be an int multiple of {block} in 0..{n - 1} (where a "
                f"tile starts); got {describe(start)}"
            )


def tile_mask(i, j, bq, bk, t, s, causal, mask, device):
    """The mask of one tile, or None when every key of the tile is visible."""
    check_tile(i, j, bq, bk, t, s, causal, mask, device)
    keep = None
    if causal and j + bk - 1 > i + (s - t):  # crosses the diagonal
        rows = torch.arange(i, i + bq, device=device)[:, None] + (s - t)
        keep = torch.arange(j, j + bk, device=device)[None, :] <= rows
    if mask is not None:
        tile = mask[..., i : i + bq, j : j + bk]
        keep = tile if keep is None else keep & tile
    return keep


def check_tiled_backward(
    q, k, v, out, lse, dout, causal, mask, scale, block_q, block_k
) -> None:
    """The arguments of `tiled_backward`: those of `tiled_forward`, and its
    results `out (..., t, d_v)` and `lse (..., t)` with `dout` shaped like
    `out`, float tensors of q's dtype."""
    check_attention(q, k, v, mask, scale, block_q, block_k)
    check_bool(causal, "causal")
    want = {
        "out": q.shape[:-1] + v.shape[-1:],
        "lse": q.shape[:-1],
        "dout": q.shape[:-1] + v.shape[-1:],
    }
    for name, value in (("out", out), ("lse", lse), ("dout", dout)):
        shape = "(..., t)" if name == "lse" else "(..., t, d_v)"
        check_tensor(value, name, shape)
        if value.shape != want[name] or value.dtype != q.dtype:
            raise ValueError(
                f"{name} must be {shape} = {tuple(want[name])} of q's dtype {q.dtype}, "
                f"as tiled_forward gives it; got {describe(value)}"
            )


def tiled_backward(
    q, k, v, out, lse, dout, causal=False, mask=None, scale=None, block_q=64, block_k=64
):
    """The gradients of tiled attention, recomputing each tile's `P = exp(S - lse)`."""
    check_tiled_backward(q, k, v, out, lse, dout, causal, mask, scale, block_q, block_k)
    t, s = q.shape[-2], k.shape[-2]
    c = q.shape[-1] ** -0.5 if scale is None else scale
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    big_d = (dout * out).sum(-1, keepdim=True)  # (..., t, 1)
    for i in range(0, t, block_q):
        rows = slice(i, i + block_q)
        qi, doi, lse_i = q[..., rows, :] * c, dout[..., rows, :], lse[..., rows, None]
        last = i + block_q - 1 + (s - t)
        for j in range(0, s, block_k):
            if causal and j > last:
                break
            cols = slice(j, j + block_k)
            # the tile's probabilities, recomputed: (..., bq, bk)
            p = torch.exp(qi @ k[..., cols, :].transpose(-2, -1) - lse_i)
            keep = tile_mask(i, j, block_q, block_k, t, s, causal, mask, q.device)
            if keep is not None:
                p = p.masked_fill(~keep, 0.0)
            dv[..., cols, :] += p.transpose(-2, -1) @ doi
            ds = p * (doi @ v[..., cols, :].transpose(-2, -1) - big_d[..., rows, :])
            dq[..., rows, :] += ds @ k[..., cols, :] * c
            dk[..., cols, :] += ds.transpose(-2, -1) @ qi
    return dq, dk, dv


class TiledAttention(torch.autograd.Function):
    """Autograd tiled attention: saves q, k, v, out, lse (O(t)); backward recomputes."""

    @staticmethod
    def forward(ctx, q, k, v, causal, mask, scale, block_q, block_k):
        check_bool(causal, "causal")
        out, lse = tiled_forward(q, k, v, causal, mask, scale, block_q, block_k)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = (causal, mask, scale, block_q, block_k)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = tiled_backward(q, k, v, out, lse, grad_out, *ctx.options)
        return dq, dk, dv, None, None, None, None, None


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """Exact softmax attention computed tile by tile, differentiable with the
    recomputing backward pass of `TiledAttention`; equal to
    `naive_attention`.

    Shapes: q `(..., t, d)`, k `(..., s, d)`, v `(..., s, d_v)` → `(..., t,
    d_v)`.
    """
    check_attention(q, k, v, mask, scale, block_q, block_k)
    return TiledAttention.apply(q, k, v, bool(causal), mask, scale, block_q, block_k)


def attention_flops(t: int, d: int, heads: int = 1, causal: bool = False) -> float:
    """Multiply-adds ×2 of the two matrix products of attention (`QKᵀ` and `PV`)."""
    check_sizes(t=t, d=d, heads=heads)
    return 4.0 * heads * t * t * d * (0.5 if causal else 1.0)


def io_bytes(t: int, d: int, sram_floats: int, bytes_per_float: int = 4) -> dict:
    """Memory traffic (bytes) between HBM and SRAM of standard attention,
    `Θ(t d + t²)` (the scores are written and read), and of FlashAttention,
    `Θ(t² d² / M)` for an SRAM of `M` floats (K and V are read once per query block
    of `M / (4d)` rows)."""
    check_sizes(t=t, d=d, sram_floats=sram_floats, bytes_per_float=bytes_per_float)
    if sram_floats < 4 * d:
        raise ValueError(
            f"sram_floats must hold at least one row of q, k, v and o "
            f"(4·d = {4 * d}); got {sram_floats}"
        )
    standard = (
        4 * t * d + 4 * t * t
    ) * bytes_per_float  # q k v o; S and P written+read
    passes = math.ceil(t / (sram_floats // (4 * d)))  # query blocks
    flash = (
        2 * t * d + passes * 2 * t * d
    ) * bytes_per_float  # q o once, k v per block
    return {"standard": float(standard), "flash": float(flash)}


SOFTMAX_FLOPS = 5  # per score: max, subtract, exp, sum, divide


def check_attention_flops_total(t, d, block, backward) -> None:
    """The arguments of `attention_flops_total`."""
    check_sizes(t=t, d=d)
    if block is not None:
        check_int(block, "block", 1)
    check_bool(backward, "backward")


def attention_flops_total(t: int, d: int, block=None, backward: bool = False) -> int:
    """FLOPs of one head of attention, q k v `(t, d)`: naive (`block=None`) or tiled
    with key blocks of `block`; forward, or forward + backward with `backward=True`.

    Naive forward: `QKᵀ` `2t²d` + softmax `5t²` (`SOFTMAX_FLOPS` per score)
    + `PV` `2t²d`. Tiled forward adds the online-softmax rescaling, per query row and
    key block: `m = max(m, rowmax)` 1, `α = exp(m_old − m)` 2, `ℓ ← αℓ + rowsum` 2,
    `o ← αo + P̃V` `2d`, i.e. `t·⌈t/block⌉·(2d + 5)`. Naive backward reads the stored
    `P`: `dV = PᵀdO`, `dP = dO Vᵀ`, `dQ = dS K`, `dK = dSᵀQ` `4·2t²d`,
    `dS = P∘(dP − D)` `2t²`, `D = rowsum(dO∘O)` `2td`. FlashAttention's backward
    also recomputes `QKᵀ` and the softmax: `+ 2t²d + 5t²`. The scale `1/√d` and
    the masks are not counted.
    """
    check_attention_flops_total(t, d, block, backward)
    matmul = 2 * t * t * d
    forward = 2 * matmul + SOFTMAX_FLOPS * t * t
    if block is not None:
        forward += t * math.ceil(t / block) * (2 * d + 5)
    if not backward:
        return forward
    grad = 4 * matmul + 2 * t * t + 2 * t * d
    if block is not None:
        grad += matmul + SOFTMAX_FLOPS * t * t
    return forward + grad
