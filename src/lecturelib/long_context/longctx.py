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

Trained on a task (chapter 18's long-dependency and passkey runs):

- :func:`recall_task`: a value symbol placed a controlled distance ``D`` before the
  query; :class:`SegmentModel` reads it as a fixed window (the last segment), with
  Transformer-XL recurrence (earlier segments run without gradient, their keys and
  values cached) or as a Recurrent Memory Transformer (Bulatov et al.,
  arXiv:2207.06881: memory tokens read and written in every segment, trained with
  backpropagation through all segments); :func:`recall_accuracy` scores it by distance.
- :func:`memory_logits`: a GPT trained on short passkey windows reads a long haystack:
  the earlier windows are encoded alone and their (unrotated) keys and values stored;
  the last window's queries attend to their local keys and to the ``top`` stored ones
  they match best (exact search or :class:`IVFIndex`), in one softmax, the retrieved
  entries placed at the query's own position (a kNN memory, no position of its own).

Simplifications: the chapter-11 model is used as trained (no training with the memory);
the index is rebuilt, not updated; the memory is written by windows read alone.

Shapes: ``b`` batch, ``h`` heads, ``t`` queries, ``s`` stored keys, ``e`` d_head,
``d`` d_model.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lecturelib import tasks
from lecturelib.efficiency import kvcache
from lecturelib.pretraining import gpt


def _positive(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")


@torch.no_grad()
def segment_losses(
    model: gpt.GPT, ids: torch.Tensor, segment: int, memory: bool = True
) -> torch.Tensor:
    """Next-token losses over ``ids`` read in segments of ``segment`` tokens, with the
    previous segment's keys and values as memory (Transformer-XL) or without.

    Shapes: ids ``(b, T)`` → losses ``(b, T - 1)``."""
    kvcache.check_gpt(model)
    _positive(segment, "segment")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError("ids must be a (b, T) tensor of token ids with T >= 2")
    window = 2 * segment if memory else segment
    if window > model.config.seq_len:
        raise ValueError(
            f"the window (memory + segment = {window} tokens) must fit the "
            f"model's trained context of {model.config.seq_len}"
        )
    b, T = ids.shape
    logits = []
    cache = kvcache.new_cache(model, b, window)
    for start in range(0, T - 1, segment):
        x = ids[:, start : min(start + segment, T - 1)]
        if not memory or cache.length + x.shape[1] > window:
            cache = _keep_last(model, cache, segment if memory else 0, window)
        logits.append(kvcache.cached_forward(model, x, cache))
    logits = torch.cat(logits, 1)  # (b, T - 1, v)
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
        k = cache.layers[layer]["k"][:, :, shift : cache.length]  # rotated at shift..
        v = cache.layers[layer]["v"][:, :, shift : cache.length]
        k = _unrotate(back, k, shift)
        new.write(layer, k=new.rope(k, 0), v=v)
    new.advance(n)
    return new


def _unrotate(rope: kvcache.Rope, k: torch.Tensor, start: int) -> torch.Tensor:
    t = k.shape[-2]
    cos, sin = rope.cos[start : start + t], -rope.sin[start : start + t]
    k1, k2 = k[..., 0::2], k[..., 1::2]
    return torch.stack([k1 * cos - k2 * sin, k1 * sin + k2 * cos], -1).flatten(-2)


def _check_qkv(q, keys, values, top) -> None:
    ok = (
        all(isinstance(x, torch.Tensor) for x in (q, keys, values))
        and q.dim() == 2
        and keys.dim() == 2
        and values.dim() == 2
        and q.shape[1] == keys.shape[1]
        and keys.shape[0] == values.shape[0]
    )
    if not ok:
        raise ValueError(
            "q must be (t, e), keys (s, e) and values (s, e_v) with the same e and s"
        )
    _positive(top, "top")
    if top > keys.shape[0]:
        raise ValueError(f"top ({top}) must be at most the {keys.shape[0]} stored keys")


def knn_attention(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    top: int,
    index: "IVFIndex | None" = None,
) -> torch.Tensor:
    """Softmax attention of each query over its ``top`` best-scoring stored keys only,
    found exactly or with ``index``. Shapes: q ``(t, e)``, keys ``(s, e)``, values
    ``(s, e_v)`` → ``(t, e_v)``."""
    _check_qkv(q, keys, values, top)
    idx = (
        (q @ keys.T).topk(top, -1).indices if index is None else index.search(q, top)
    )  # (t, top)
    scores = (q[:, None] * keys[idx]).sum(-1) / math.sqrt(q.shape[1])  # (t, top)
    return (scores.softmax(-1)[..., None] * values[idx]).sum(1)


class IVFIndex:
    """An inverted-file index for inner-product search: the keys clustered into
    ``n_cells`` by k-means; a query scans the keys of its ``n_probe`` best cells only."""

    def __init__(
        self,
        keys: torch.Tensor,
        n_cells: int,
        n_probe: int,
        iters: int = 10,
        seed: int = 0,
    ):
        _positive(n_cells, "n_cells")
        _positive(n_probe, "n_probe")
        if not isinstance(keys, torch.Tensor) or keys.dim() != 2:
            raise ValueError("keys must be a (s, e) tensor")
        if n_probe > n_cells or n_cells > keys.shape[0]:
            raise ValueError(
                f"need n_probe <= n_cells <= s; got n_probe={n_probe}, "
                f"n_cells={n_cells}, s={keys.shape[0]}"
            )
        g = torch.Generator().manual_seed(seed)
        centres = keys[torch.randperm(keys.shape[0], generator=g)[:n_cells]].clone()
        for _ in range(iters):
            cell = torch.cdist(keys, centres).argmin(1)  # (s,)
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


def unlimiformer_query(
    h_d: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor
) -> torch.Tensor:
    """The query ``h_d W_q W_kᵀ`` that scores raw states ``h_e`` as ``(h_d W_q)(h_e
    W_k)ᵀ`` would. Shapes: h_d ``(t, d)``, W_q, W_k ``(d, e)`` → ``(t, d)``."""
    ok = (
        all(isinstance(x, torch.Tensor) and x.dim() == 2 for x in (h_d, W_q, W_k))
        and W_q.shape == W_k.shape
        and h_d.shape[1] == W_q.shape[0]
    )
    if not ok:
        raise ValueError("h_d must be (t, d) and W_q, W_k (d, e)")
    return h_d @ W_q @ W_k.T


def recall_task(
    n: int,
    n_segments: int,
    segment: int,
    n_values: int = 4,
    vocab_size: int = 16,
    seed: int = 0,
):
    """``n`` sequences of ``n_segments * segment`` tokens: random filler, one value
    symbol at distance ``D`` (uniform in ``1..T-1``) before the last position, which
    holds ``tasks.SEP``; the answer is the value. Values are the symbols
    ``2..n_values+1`` and occur nowhere else; filler is ``n_values+2..vocab_size-1``.

    Shapes: → x ``(n, T)``, answer ``(n,)``, distance ``(n,)``."""
    for name, value in (
        ("n", n),
        ("n_segments", n_segments),
        ("segment", segment),
        ("n_values", n_values),
        ("vocab_size", vocab_size),
    ):
        _positive(value, name)
    if n_segments * segment < 2:
        raise ValueError("need n_segments * segment >= 2 (a value and the query)")
    if vocab_size < n_values + 3:
        raise ValueError(
            f"vocab_size must be at least n_values + 3 = {n_values + 3} "
            f"(SEP, values, filler); got {vocab_size}"
        )
    T = n_segments * segment
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(n_values + 2, vocab_size, (n, T), generator=g)
    answer = torch.randint(2, n_values + 2, (n,), generator=g)
    distance = torch.randint(1, T, (n,), generator=g)
    x[torch.arange(n), T - 1 - distance] = answer
    x[:, -1] = tasks.SEP
    return x, answer, distance


KINDS = ("window", "xl", "rmt")


class SegmentModel(nn.Module):
    """A GPT that reads ``(b, T)`` in segments of ``segment`` tokens and predicts from
    the last position: ``"window"`` reads the last segment only; ``"xl"`` caches the
    previous segment's keys and values at every layer (earlier segments run without
    gradient: stop-gradient); ``"rmt"`` prepends ``n_memory`` read-memory tokens and
    appends as many write tokens, whose outputs become the next segment's read memory
    (gradient flows through all segments).

    Shapes: x ``(b, T)`` → logits ``(b, v)``."""

    def __init__(
        self,
        kind: str,
        segment: int,
        vocab_size: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        n_memory: int = 4,
        seed: int = 0,
    ):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
        _positive(segment, "segment")
        _positive(n_memory, "n_memory")
        torch.manual_seed(seed)
        self.kind, self.segment, self.n_memory = kind, segment, n_memory
        self.gpt = gpt.GPT(
            gpt.GPTConfig(
                vocab_size=vocab_size,
                seq_len=2 * segment + 2 * n_memory,
                d_model=d_model,
                n_layers=n_layers,
                n_heads=n_heads,
            )
        )
        self.memory = (
            nn.Parameter(0.02 * torch.randn(n_memory, d_model))
            if kind == "rmt"
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        S = self.segment
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] % S:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must be (b, T) token ids with T a multiple of the "
                f"segment ({S}); got {got}"
            )
        segments = x.split(S, 1)
        if self.kind == "window":
            return self.gpt(segments[-1])[:, -1]
        if self.kind == "xl":
            cache = kvcache.new_cache(self.gpt, x.shape[0], 2 * S)
            with torch.no_grad():  # stop-gradient
                for seg in segments[:-1]:
                    if cache.length + S > 2 * S:
                        cache = _keep_last(self.gpt, cache, S, 2 * S)
                    kvcache.cached_forward(self.gpt, seg, cache)
                if cache.length + S > 2 * S:
                    cache = _keep_last(self.gpt, cache, S, 2 * S)
            return kvcache.cached_forward(self.gpt, segments[-1], cache)[:, -1]
        mem = self.memory.expand(x.shape[0], -1, -1)  # (b, m, d)
        for seg in segments:  # BPTT over segments
            h = torch.cat([mem, self.gpt.embed_ids(seg), mem], 1)  # (b, m + S + m, d)
            for block in self.gpt.blocks:
                h = block(h)
            mem = h[:, -self.n_memory :]
        return self.gpt.head(self.gpt.norm(h[:, -self.n_memory - 1]))


def train_recall(
    model: SegmentModel,
    steps: int,
    batch: int,
    n_segments: int,
    n_values: int = 4,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train ``model`` on fresh :func:`recall_task` batches (cross-entropy of the
    answer) with AdamW; returns the losses."""
    if not isinstance(model, SegmentModel):
        raise TypeError(f"model must be a SegmentModel; got {type(model).__name__}")
    _positive(steps, "steps")
    _positive(batch, "batch")
    vocab = model.gpt.config.vocab_size
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    model.train()
    for step in range(steps):
        x, answer, _ = recall_task(
            batch,
            n_segments,
            model.segment,
            n_values,
            vocab,
            seed=seed * 100_003 + step,
        )
        loss = F.cross_entropy(model(x.to(device)), answer.to(device))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def recall_accuracy(
    model: SegmentModel, x: torch.Tensor, answer: torch.Tensor, distance: torch.Tensor
) -> torch.Tensor:
    """Accuracy for each band of distances ``1..S``, ``S+1..2S``, ... (``S`` the
    segment). Shapes: → ``(T / S,)``."""
    if not isinstance(model, SegmentModel):
        raise TypeError(f"model must be a SegmentModel; got {type(model).__name__}")
    device = next(model.parameters()).device
    right = (model(x.to(device)).argmax(-1).cpu() == answer).float()
    band = (distance - 1) // model.segment  # (n,)
    n_bands = x.shape[1] // model.segment
    return torch.stack([right[band == i].mean() for i in range(n_bands)])


@torch.no_grad()
def window_qkv(model: gpt.GPT, ids: torch.Tensor) -> list[torch.Tensor]:
    """Unrotated queries, keys and values at every layer of ``ids`` cut into windows of
    ``seq_len`` read alone.

    Shapes: ids ``(b, n·w)`` → per layer ``(3, b, h, n·w, e)``."""
    kvcache.check_gpt(model)
    w = model.config.seq_len
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] % w:
        raise ValueError(f"ids must be (b, T) with T a multiple of seq_len = {w}")
    b = ids.shape[0]
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


@torch.no_grad()
def memory_logits(
    model: gpt.GPT,
    ids: torch.Tensor,
    top: int = 0,
    n_cells: int | None = None,
    n_probe: int = 1,
    layers: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """Logits at the last window (``seq_len`` tokens) of ``ids``: plain (``top=0``), or
    with a kNN memory of the earlier windows' keys and values at every head of
    ``layers`` (all by default), searched exactly or, with ``n_cells``, through an
    :class:`IVFIndex`.

    Shapes: ids ``(b, n·w)`` → ``(b, w, v)``."""
    kvcache.check_gpt(model)
    w, c = model.config.seq_len, model.config
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] % w:
        raise ValueError(f"ids must be (b, T) with T a multiple of seq_len = {w}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be a non-negative int; got {top!r}")
    if top > ids.shape[1] - w:
        raise ValueError(
            f"top ({top}) must be at most the {ids.shape[1] - w} stored positions"
        )
    layers = tuple(range(c.n_layers)) if layers is None else layers
    if not isinstance(layers, tuple) or not all(
        isinstance(i, int) and 0 <= i < c.n_layers for i in layers
    ):
        raise ValueError(
            f"layers must be a tuple of layer numbers in "
            f"0..{c.n_layers - 1}; got {layers!r}"
        )
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
    """``x[b, h, idx[b, h, t, j]]``. Shapes: x ``(b, h, s, e)``, idx ``(b, h, t, k)`` →
    ``(b, h, t, k, e)``."""
    b, h, t, k = idx.shape
    flat = idx.reshape(b, h, t * k, 1).expand(-1, -1, -1, x.shape[-1])
    return x.gather(2, flat).view(b, h, t, k, x.shape[-1])
