"""Chapter 18: reading past the context window by retrieving stored keys and values.

- `knn_attention`: attention over the `top` stored keys nearest to the query
  (Memorizing Transformer, Wu et al., arXiv:2203.08913), exact or through an
  `IVFIndex` (an inverted-file index: k-means cells, only the `n_probe` nearest
  cells searched, as FAISS's `IndexIVFFlat`).
- `unlimiformer_query`: Unlimiformer's reformulation (Bertsch et al.,
  arXiv:2305.01625): `q kᵀ = (h_d W_q)(h_e W_k)ᵀ = (h_d W_q W_kᵀ) h_eᵀ`, so one index of
  the encoder states `h_e` serves every head and layer.
- `memory_logits`: a GPT trained on short passkey windows reads a long haystack:
  the earlier windows are encoded alone (`window_qkv`) and their (unrotated) keys
  and values stored; the last window's queries attend to their local keys and to the
  `top` stored ones they match best (exact search or `IVFIndex`), in one
  softmax, the retrieved entries placed at the query's own position (a kNN memory, no
  position of its own).

Simplifications: the chapter-11 model is used as trained (no training with the memory);
the index is rebuilt, not updated; the memory is written by windows read alone.

Shapes: `b` batch, `h` heads, `t` queries, `s` stored keys, `e` d_head,
`d` d_model.
"""

from __future__ import annotations

import math

import torch
from einops import rearrange

from lecturelib.efficiency import kvcache
from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_ids,
    check_int,
    check_sizes,
    check_tensor,
    check_type,
    describe,
)


def check_matrices(name: str, *matrices: torch.Tensor) -> None:
    """Every one of `matrices` must be a tensor (`name` lists them for the message)."""
    for m in matrices:
        check_type(m, name, torch.Tensor, "tensors")


def check_finite(name: str, *tensors: torch.Tensor) -> None:
    """Every value of `tensors` must be finite: a NaN key scores NaN, and `topk`
    ranks it first."""
    for x in tensors:
        if not bool(torch.isfinite(x).all()):
            raise ValueError(
                f"{name} must hold finite values (a NaN or inf key or query makes the "
                f"search return wrong neighbours); got {describe(x)} with "
                f"{int((~torch.isfinite(x)).sum())} non-finite values"
            )


def check_knn(q, keys, values, top, index=None) -> None:
    """The arguments of `knn_attention`: float `q`, `keys` and `values` of
    matching sizes, finite queries and keys, `top` in `1..s` and an `index`, if
    given, built from these very keys."""
    check_matrices("q, keys and values", q, keys, values)
    for name, x in (("q", q), ("keys", keys), ("values", values)):
        check_tensor(x, name, "(t, e), (s, e) or (s, e_v)")
    ok = (
        q.dim() == 2
        and keys.dim() == 2
        and values.dim() == 2
        and q.shape[1] == keys.shape[1]
        and keys.shape[0] == values.shape[0]
    )
    if not ok:
        raise ValueError(
            "q must be (t, e), keys (s, e) and values (s, e_v) with the same e and s"
        )
    check_sizes(top=top)
    if top > keys.shape[0]:
        raise ValueError(f"top ({top}) must be at most the {keys.shape[0]} stored keys")
    check_finite("q and keys", q, keys)
    if index is not None:
        check_type(index, "index", IVFIndex, "an IVFIndex or None")
        if index.keys is not keys and (
            index.keys.shape != keys.shape or not torch.equal(index.keys, keys)
        ):
            raise ValueError(
                f"index must be built from these keys: it holds "
                f"{describe(index.keys)}, other than keys {describe(keys)}; its "
                f"positions would pick the wrong keys and values"
            )


def knn_attention(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    top: int,
    index: "IVFIndex | None" = None,
) -> torch.Tensor:
    """Softmax attention over each query's `top` best keys, found exactly or by `index`.
    Shapes: q (t, e), keys (s, e), values (s, e_v) → (t, e_v)."""
    check_knn(q, keys, values, top, index)
    idx = (
        (q @ keys.T).topk(top, -1).indices if index is None else index.search(q, top)
    )  # (t, top)
    scores = (q[:, None] * keys[idx]).sum(-1) / math.sqrt(q.shape[1])  # (t, top)
    return (scores.softmax(-1)[..., None] * values[idx]).sum(1)


def check_index(keys, n_cells, n_probe, iters=10, seed=0) -> None:
    """The arguments of `IVFIndex`: finite float keys `(s, e)`, `n_probe <=
    n_cells <= s`, `iters >= 0` k-means steps and an int seed."""
    check_sizes(n_cells=n_cells, n_probe=n_probe)
    check_type(keys, "keys", torch.Tensor, "a (s, e) tensor")
    if keys.dim() != 2:
        raise ValueError("keys must be a (s, e) tensor")
    check_tensor(keys, "keys", "(s, e)")
    if n_probe > n_cells or n_cells > keys.shape[0]:
        raise ValueError(
            f"need n_probe <= n_cells <= s; got n_probe={n_probe}, "
            f"n_cells={n_cells}, s={keys.shape[0]}"
        )
    check_finite("keys", keys)
    check_int(iters, "iters", 0)
    check_int(seed, "seed", 0)


def check_search(index, q, top=1) -> None:
    """The arguments of `IVFIndex.search`: finite float queries `(t, e)` of
    the index's `e` (a NaN query scores NaN everywhere, and `topk` still returns
    positions) and `top` in `1..s`."""
    e, s = index.keys.shape[1], index.keys.shape[0]
    check_tensor(q, "q", f"(t, e) with e = {e}", dims=2)
    if q.shape[1] != e:
        raise ValueError(f"q must be (t, e) with e = {e}; got {tuple(q.shape)}")
    check_int(top, "top", 1, s)
    check_finite("q", q)


def _cell_means(
    keys: torch.Tensor, cell: torch.Tensor, centres: torch.Tensor
) -> torch.Tensor:
    """One k-means update: each centre moves to the mean of its cell's keys (an empty
    cell keeps its centre). On an accelerator the cells are summed at once, without
    reading anything back; the CPU, which has nothing to wait for, takes them one by
    one, as the mean of each cell's rows (the same centres up to float rounding)."""
    if keys.device.type != "cpu":
        ones = torch.ones_like(keys[:, 0])
        counts = torch.zeros_like(centres[:, 0]).index_add_(0, cell, ones)  # (n,)
        sums = torch.zeros_like(centres).index_add_(0, cell, keys)  # (n, e)
        means = sums / counts.clamp(min=1)[:, None]
        return torch.where(counts[:, None] > 0, means, centres)
    centres = centres.clone()
    for c in range(len(centres)):
        if (cell == c).any():
            centres[c] = keys[cell == c].mean(0)
    return centres


class IVFIndex:
    """An inverted-file index for inner-product search: the keys clustered into
    `n_cells` by k-means; a query scans the keys of its `n_probe` best cells only."""

    def __init__(
        self,
        keys: torch.Tensor,
        n_cells: int,
        n_probe: int,
        iters: int = 10,
        seed: int = 0,
    ):
        check_index(keys, n_cells, n_probe, iters, seed)
        g = torch.Generator().manual_seed(seed)
        centres = keys[torch.randperm(keys.shape[0], generator=g)[:n_cells]].clone()
        for _ in range(iters):
            cell = torch.cdist(keys, centres).argmin(1)  # (s,)
            centres = _cell_means(keys, cell, centres)
        self.keys, self.centres, self.n_probe = keys, centres, n_probe
        self.cell = torch.cdist(keys, centres).argmin(1)

    def search(self, q: torch.Tensor, top: int) -> torch.Tensor:
        """The `top` best keys among the probed cells (fewer scanned than all).
        Shapes: q `(t, e)` → indices `(t, top)`."""
        check_search(self, q, top)
        probe = (q @ self.centres.T).topk(self.n_probe, -1).indices  # (t, n_probe)
        allowed = (self.cell[None, :, None] == probe[:, None, :]).any(-1)  # (t, s)
        scores = (q @ self.keys.T).masked_fill(~allowed, float("-inf"))
        return scores.topk(top, -1).indices

    def scanned(self, q: torch.Tensor) -> torch.Tensor:
        """How many keys each query scans. Shapes: `(t, e)` → `(t,)`."""
        check_search(self, q)
        probe = (q @ self.centres.T).topk(self.n_probe, -1).indices
        return (self.cell[None, :, None] == probe[:, None, :]).any(-1).sum(1)


def check_unlimiformer(h_d, W_q, W_k) -> None:
    """The arguments of `unlimiformer_query`."""
    check_matrices("h_d, W_q and W_k", h_d, W_q, W_k)
    ok = (
        all(x.dim() == 2 for x in (h_d, W_q, W_k))
        and W_q.shape == W_k.shape
        and h_d.shape[1] == W_q.shape[0]
    )
    if not ok:
        raise ValueError("h_d must be (t, d) and W_q, W_k (d, e)")


def unlimiformer_query(
    h_d: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor
) -> torch.Tensor:
    """The query `h_d W_q W_kᵀ` that scores raw states `h_e` as `(h_d W_q)(h_e
    W_k)ᵀ` would. Shapes: h_d `(t, d)`, W_q, W_k `(d, e)` → `(t, d)`."""
    check_unlimiformer(h_d, W_q, W_k)
    return h_d @ W_q @ W_k.T


def check_windows(model, ids) -> None:
    """`model` a RoPE GPT, `ids` `(b, T)` token ids in whole windows of its
    `seq_len`."""
    kvcache.check_gpt(model)
    check_ids(ids, "ids")
    w = model.config.seq_len
    if ids.dim() != 2 or ids.shape[1] % w:
        raise ValueError(f"ids must be (b, T) with T a multiple of seq_len = {w}")


@torch.no_grad()
def window_qkv(model: gpt.GPT, ids: torch.Tensor) -> list[torch.Tensor]:
    """Unrotated queries, keys and values at every layer of `ids` cut into windows of
    `seq_len` read alone.

    Shapes: ids `(b, n·w)` → per layer `(3, b, h, n·w, e)`."""
    check_windows(model, ids)
    w, b = model.config.seq_len, ids.shape[0]
    states = model.residual_stream(rearrange(ids, "b (n w) -> (b n) w", w=w))
    out = []
    for block, h in zip(model.blocks, states):
        qkv = rearrange(
            block.attn.qkv(block.norm1(h)),
            "(b n) w (three h e) -> three b h (n w) e",
            b=b,
            three=3,
            h=model.config.n_heads,
        )
        out.append(qkv)
    return out


def check_memory(model, ids, top, layers) -> None:
    """The arguments of `memory_logits`."""
    check_windows(model, ids)
    check_int(top, "top", 0)
    w, n_layers = model.config.seq_len, model.config.n_layers
    if top > ids.shape[1] - w:
        raise ValueError(
            f"top ({top}) must be at most the {ids.shape[1] - w} stored positions"
        )
    if layers is not None and (
        not isinstance(layers, tuple)
        or not all(isinstance(i, int) and 0 <= i < n_layers for i in layers)
    ):
        raise ValueError(
            f"layers must be a tuple of layer numbers in "
            f"0..{n_layers - 1}; got {layers!r}"
        )


@torch.no_grad()
def memory_logits(
    model: gpt.GPT,
    ids: torch.Tensor,
    top: int = 0,
    n_cells: int | None = None,
    n_probe: int = 1,
    layers: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """Logits at the last window (`seq_len` tokens) of `ids`: plain (`top=0`), or
    with a kNN memory of the earlier windows' keys and values at every head of
    `layers` (all by default), searched exactly or, with `n_cells`, through an
    `IVFIndex`.

    Shapes: ids `(b, n·w)` → `(b, w, v)`."""
    check_memory(model, ids, top, layers)
    w, c = model.config.seq_len, model.config
    layers = tuple(range(c.n_layers)) if layers is None else layers
    memory = window_qkv(model, ids[:, :-w]) if top else None
    x = model.embed(ids[:, -w:])  # (b, w, d)
    causal = torch.ones(w, w, dtype=torch.bool, device=x.device).tril()
    for layer, block in enumerate(model.blocks):
        q, k, v = rearrange(
            block.attn.qkv(block.norm1(x)),
            "b t (three h e) -> three b h t e",
            three=3,
            h=c.n_heads,
        )
        local = (
            block.attn.rotate(q) @ block.attn.rotate(k).transpose(-1, -2)
        ).masked_fill(~causal, float("-inf")) / math.sqrt(c.d_head)
        if top and layer in layers:
            _, k_mem, v_mem = memory[layer]  # (b, h, s, e)
            idx = torch.stack(
                [
                    torch.stack(
                        [
                            (qq @ kk.T).topk(top, -1).indices
                            if n_cells is None
                            else IVFIndex(kk, n_cells, n_probe).search(qq, top)
                            for qq, kk in zip(qb, kb)
                        ]
                    )
                    for qb, kb in zip(q, k_mem)
                ]
            )  # (b,h,t,top)
            ks = _rows(k_mem, idx)  # (b, h, t, top, e)
            vs = _rows(v_mem, idx)
            far = (q[..., None, :] * ks).sum(-1) / math.sqrt(c.d_head)  # (b, h, t, top)
            a = torch.cat([far, local], -1).softmax(-1)
            y = (a[..., :top, None] * vs).sum(-2) + a[..., top:] @ v
        else:
            y = local.softmax(-1) @ v
        x = x + block.attn.out(rearrange(y, "b h t e -> b t (h e)"))
        x = x + block.mlp(block.norm2(x))
    return model.head(model.norm(x))


def _rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """`x[b, h, idx[b, h, t, j]]`. Shapes: x `(b, h, s, e)`, idx `(b, h, t, k)` →
    `(b, h, t, k, e)`."""
    b, h, t, k = idx.shape
    flat = idx.reshape(b, h, t * k, 1).expand(-1, -1, -1, x.shape[-1])
    return x.gather(2, flat).view(b, h, t, k, x.shape[-1])
