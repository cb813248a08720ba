"""Chapter 18: reading past the context window with recurrence over segments and with
retrieval of stored keys and values.

- :func:`segment_losses`: Transformer-XL's segment recurrence (Dai et al.,
  arXiv:1901.02860) with chapter 11's GPT: a long text is read in segments of ``segment``
  tokens; each segment's queries also attend to the keys and values the previous segment
  left at every layer (a cache, so no gradient flows into it), with relative positions
  (RoPE). Without the memory each segment is read alone.
- :func:`knn_attention`: attention over the ``top`` stored keys nearest to the query
  (Memorizing Transformer, Wu et al., arXiv:2203.08913), exact or through an
  :class:`IVFIndex` (an inverted-file index: k-means cells, only the ``n_probe`` nearest
  cells searched, as FAISS's ``IndexIVFFlat``).
- :func:`unlimiformer_query`: Unlimiformer's reformulation (Bertsch et al.,
  arXiv:2305.01625): ``q kᵀ = (h_d W_q)(h_e W_k)ᵀ = (h_d W_q W_kᵀ) h_eᵀ``, so one index of
  the encoder states ``h_e`` serves every head and layer.

Simplifications: the model is used as trained (no training with the memory); the index
is rebuilt, not updated.

Shapes: ``b`` batch, ``h`` heads, ``t`` queries, ``s`` stored keys, ``e`` d_head,
``d`` d_model.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lecturelib import gpt, kvcache


def _positive(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")


@torch.no_grad()
def segment_losses(model: gpt.GPT, ids: torch.Tensor, segment: int,
                   memory: bool = True) -> torch.Tensor:
    """Next-token losses over ``ids`` read in segments of ``segment`` tokens, with the
    previous segment's keys and values as memory (Transformer-XL) or without.

    Shapes: ids ``(b, T)`` → losses ``(b, T - 1)``."""
    kvcache.check_gpt(model)
    _positive(segment, "segment")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError("ids must be a (b, T) tensor of token ids with T >= 2")
    window = 2 * segment if memory else segment
    if window > model.config.seq_len:
        raise ValueError(f"the window (memory + segment = {window} tokens) must fit the "
                         f"model's trained context of {model.config.seq_len}")
    b, T = ids.shape
    logits = []
    cache = kvcache.new_cache(model, b, window)
    for start in range(0, T - 1, segment):
        x = ids[:, start:min(start + segment, T - 1)]
        if not memory or cache.length + x.shape[1] > window:
            cache = _keep_last(model, cache, segment if memory else 0, window)
        logits.append(kvcache.cached_forward(model, x, cache))
    logits = torch.cat(logits, 1)                                 # (b, T - 1, v)
    return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")


def _keep_last(model, cache, n: int, window: int):
    """A fresh cache holding the last ``n`` entries of ``cache`` (their keys re-rotated
    to positions ``0..n-1``: RoPE scores depend only on the distance)."""
    new = kvcache.new_cache(model, cache.batch, window)
    if n == 0 or cache.length == 0:
        return new
    shift = cache.length - n
    back = kvcache.Rope(model.config.d_head, cache.length, model.config.rope_base)
    for layer in range(model.config.n_layers):
        k = cache.layers[layer]["k"][:, :, shift:cache.length]              # rotated at shift..
        v = cache.layers[layer]["v"][:, :, shift:cache.length]
        k = _unrotate(back, k, shift)
        new.write(layer, k=new.rope(k, 0), v=v)
    new.advance(n)
    return new


def _unrotate(rope: kvcache.Rope, k: torch.Tensor, start: int) -> torch.Tensor:
    t = k.shape[-2]
    cos, sin = rope.cos[start:start + t], -rope.sin[start:start + t]
    k1, k2 = k[..., 0::2], k[..., 1::2]
    return torch.stack([k1 * cos - k2 * sin, k1 * sin + k2 * cos], -1).flatten(-2)


def _check_qkv(q, keys, values, top) -> None:
    ok = all(isinstance(x, torch.Tensor) for x in (q, keys, values)) and q.dim() == 2 \
        and keys.dim() == 2 and values.dim() == 2 and q.shape[1] == keys.shape[1] \
        and keys.shape[0] == values.shape[0]
    if not ok:
        raise ValueError("q must be (t, e), keys (s, e) and values (s, e_v) with the "
                         "same e and s")
    _positive(top, "top")
    if top > keys.shape[0]:
        raise ValueError(f"top ({top}) must be at most the {keys.shape[0]} stored keys")


def knn_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, top: int,
                  index: "IVFIndex | None" = None) -> torch.Tensor:
    """Softmax attention of each query over its ``top`` best-scoring stored keys only,
    found exactly or with ``index``. Shapes: q ``(t, e)``, keys ``(s, e)``, values
    ``(s, e_v)`` → ``(t, e_v)``."""
    _check_qkv(q, keys, values, top)
    idx = (q @ keys.T).topk(top, -1).indices if index is None \
        else index.search(q, top)                                 # (t, top)
    scores = (q[:, None] * keys[idx]).sum(-1) / math.sqrt(q.shape[1])  # (t, top)
    return (scores.softmax(-1)[..., None] * values[idx]).sum(1)


class IVFIndex:
    """An inverted-file index for inner-product search: the keys clustered into
    ``n_cells`` by k-means; a query scans the keys of its ``n_probe`` best cells only."""

    def __init__(self, keys: torch.Tensor, n_cells: int, n_probe: int, iters: int = 10,
                 seed: int = 0):
        _positive(n_cells, "n_cells")
        _positive(n_probe, "n_probe")
        if not isinstance(keys, torch.Tensor) or keys.dim() != 2:
            raise ValueError("keys must be a (s, e) tensor")
        if n_probe > n_cells or n_cells > keys.shape[0]:
            raise ValueError(f"need n_probe <= n_cells <= s; got n_probe={n_probe}, "
                             f"n_cells={n_cells}, s={keys.shape[0]}")
        g = torch.Generator().manual_seed(seed)
        centres = keys[torch.randperm(keys.shape[0], generator=g)[:n_cells]].clone()
        for _ in range(iters):
            cell = torch.cdist(keys, centres).argmin(1)           # (s,)
            for c in range(n_cells):
                if (cell == c).any():
                    centres[c] = keys[cell == c].mean(0)
        self.keys, self.centres, self.n_probe = keys, centres, n_probe
        self.cell = torch.cdist(keys, centres).argmin(1)

    def search(self, q: torch.Tensor, top: int) -> torch.Tensor:
        """The ``top`` best keys among the probed cells (fewer scanned than all).
        Shapes: q ``(t, e)`` → indices ``(t, top)``."""
        probe = (q @ self.centres.T).topk(self.n_probe, -1).indices  # (t, n_probe)
        allowed = (self.cell[None, :, None] == probe[:, None, :]).any(-1)  # (t, s)
        scores = (q @ self.keys.T).masked_fill(~allowed, float("-inf"))
        return scores.topk(top, -1).indices

    def scanned(self, q: torch.Tensor) -> torch.Tensor:
        """How many keys each query scans. Shapes: ``(t, e)`` → ``(t,)``."""
        probe = (q @ self.centres.T).topk(self.n_probe, -1).indices
        return (self.cell[None, :, None] == probe[:, None, :]).any(-1).sum(1)


def unlimiformer_query(h_d: torch.Tensor, W_q: torch.Tensor,
                       W_k: torch.Tensor) -> torch.Tensor:
    """The query ``h_d W_q W_kᵀ`` that scores raw states ``h_e`` as ``(h_d W_q)(h_e
    W_k)ᵀ`` would. Shapes: h_d ``(t, d)``, W_q, W_k ``(d, e)`` → ``(t, d)``."""
    ok = all(isinstance(x, torch.Tensor) and x.dim() == 2 for x in (h_d, W_q, W_k)) \
        and W_q.shape == W_k.shape and h_d.shape[1] == W_q.shape[0]
    if not ok:
        raise ValueError("h_d must be (t, d) and W_q, W_k (d, e)")
    return h_d @ W_q @ W_k.T
