"""Chapter 14: the KV cache, prefill and decode, and the cache sizes of published
models.

Generating token `t` with a decoder-only Transformer needs the keys and values of all
earlier tokens at every layer. Recomputing them costs a forward pass over the whole
prefix at every step (`O(L²)` for `L` tokens); storing them in a per-layer cache costs
one token's forward pass and one row of attention per step (`O(L)`) (Pope et al.,
arXiv:2211.05102). `KVCache` is that store, preallocated to the sizes of a
`KVCacheConfig`; `cached_forward` runs chapter 11's `lecturelib.pretraining.gpt.GPT`
with its own parameters and its own RoPE tables on a cache made for it (`new_cache`; a
cache refuses any other model): a *prefill* of the prompt, then one *decode* step per
new token. `recompute_logits` is the reference, the whole prefix recomputed. Plain RoPE
has no length limit, so both run past the model's trained context (chapter 18 asks how
well); a table that `rope_scaling.extend` changed is used as it is, and stops where it
stops. Variants the cached path cannot run exactly are refused by name (`check_gpt`,
`check_new_cache`).

`PUBLISHED` holds the attention configurations of real models, each with its
source, and `cache_bytes_per_token` computes `2 · n_kv_heads · d_head · n_layers
· bytes`.

For serving, `simulate_batching` counts the decode steps of static and continuous
batching, and `quantize_kv` stores the cache as int8 with one scale per row.

Shapes: `b` batch, `h` heads, `g` key/value heads, `t` new positions, `s`
cached positions, `e` d_head, `d` d_model, `v` vocabulary.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import repeat

from lecturelib.efficiency.served_model import (
    Rope,
    check_gpt,
    check_positions,
    check_token_wise,
    other_model,
)
from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_bool,
    check_ids,
    check_int,
    check_sizes,
    check_tensor,
    check_type,
    describe,
)


def check_published(repo, sizes: dict) -> None:
    """The arguments of `published`: a Hub repository `"owner/name"` and at
    least one size, each an int >= 1."""
    check_type(repo, "repo", str, "a str 'owner/name'")
    if len(repo.split("/")) != 2 or not all(repo.split("/")):
        raise ValueError(
            f"repo must be a Hub repository 'owner/name'; got {describe(repo)}"
        )
    if not sizes:
        raise ValueError(
            "published needs at least one size (n_layers=..., ...); got none"
        )
    check_sizes(**sizes)


def published(repo: str, **sizes: int) -> dict:
    """A published model's attention `sizes`, with its config.json on the Hub."""
    check_published(repo, sizes)
    return dict(sizes, source=f"https://huggingface.co/{repo}/blob/main/config.json")


# Attention shapes of published models (values from each model's config.json).
PUBLISHED = {
    "GPT-2 (124M)": published(
        "openai-community/gpt2", n_layers=12, n_heads=12, n_kv_heads=12, d_head=64
    ),
    "Llama-2-7B": published(
        "meta-llama/Llama-2-7b-hf", n_layers=32, n_heads=32, n_kv_heads=32, d_head=128
    ),
    "Llama-2-70B": published(
        "meta-llama/Llama-2-70b-hf", n_layers=80, n_heads=64, n_kv_heads=8, d_head=128
    ),
    "Llama-3-8B": published(
        "meta-llama/Meta-Llama-3-8B", n_layers=32, n_heads=32, n_kv_heads=8, d_head=128
    ),
    "Mistral-7B": published(
        "mistralai/Mistral-7B-v0.1", n_layers=32, n_heads=32, n_kv_heads=8, d_head=128
    ),
    "DeepSeek-V2": published(  # MLA: kv_lora_rank 512, qk_rope_head_dim 64
        "deepseek-ai/DeepSeek-V2", n_layers=60, n_heads=128, d_latent=512, d_rope=64
    ),
}


def cache_bytes_per_token(
    n_layers: int, n_kv_heads: int, d_head: int, bytes_per_value: int = 2
) -> int:
    """Bytes per token: a key and a value per key/value head and layer."""
    check_sizes(
        n_layers=n_layers,
        n_kv_heads=n_kv_heads,
        d_head=d_head,
        bytes_per_value=bytes_per_value,
    )
    return 2 * n_kv_heads * d_head * n_layers * bytes_per_value


def mla_bytes_per_token(
    n_layers: int, d_latent: int, d_rope: int, bytes_per_value: int = 2
) -> int:
    """Bytes per token of MLA: a latent and one shared RoPE key per layer."""
    check_sizes(
        n_layers=n_layers,
        d_latent=d_latent,
        d_rope=d_rope,
        bytes_per_value=bytes_per_value,
    )
    return (d_latent + d_rope) * n_layers * bytes_per_value


def published_bytes_per_token(name: str, bytes_per_value: int = 2) -> int:
    """The cache bytes per token of `PUBLISHED[name]` (MLA or grouped heads)."""
    if name not in PUBLISHED:
        raise ValueError(f"name must be one of {sorted(PUBLISHED)}; got {name!r}")
    c = PUBLISHED[name]
    if "d_latent" in c:
        return mla_bytes_per_token(
            c["n_layers"], c["d_latent"], c["d_rope"], bytes_per_value
        )
    return cache_bytes_per_token(
        c["n_layers"], c["n_kv_heads"], c["d_head"], bytes_per_value
    )


@dataclass(kw_only=True)
class KVCacheConfig:
    """A `KVCache`'s sizes; `entries` maps what a layer caches to (heads, width)."""

    n_layers: int
    batch: int
    max_len: int
    entries: dict[str, tuple[int, int]]
    dtype: torch.dtype = torch.float32
    device: torch.device | str | None = None

    def __post_init__(self):
        check_kv_cache_config(self)


class KVCache:
    """Preallocated (b, heads, max_len, width) per layer and entry, filled in order."""

    def __init__(self, config: KVCacheConfig, *, rope: Rope | None = None, model=None):
        check_type(config, "config", KVCacheConfig, "a KVCacheConfig")
        c = config
        self.entries, self.batch, self.max_len = dict(c.entries), c.batch, c.max_len
        self.rope, self.model = rope, model
        self.length = 0
        self.layers = [
            {
                name: torch.zeros(
                    c.batch, heads, c.max_len, width, dtype=c.dtype, device=c.device
                )
                for name, (heads, width) in c.entries.items()
            }
            for _ in range(c.n_layers)
        ]

    @property
    def bytes_per_token(self) -> int:
        size = next(iter(self.layers[0].values())).element_size()
        per_layer = sum(heads * width for heads, width in self.entries.values())
        return per_layer * len(self.layers) * size

    def write(self, layer: int, **new: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Store `t` new positions per entry of `layer`; return views of all stored."""
        check_write(self, layer, new)
        out = []
        for name in self.entries:
            end = self.length + new[name].shape[2]
            store = self.layers[layer][name]
            store[:, :, self.length : end] = new[name]
            out.append(store[:, :, :end])
        return tuple(out)

    def advance(self, t: int) -> None:
        """Count `t` positions as stored (after every layer has written them)."""
        check_advance(self, t)
        self.length += t


def check_kv_cache_config(c: KVCacheConfig) -> None:
    """The fields of a `KVCacheConfig`."""
    check_sizes(n_layers=c.n_layers, batch=c.batch, max_len=c.max_len)
    entries = c.entries
    if (
        not isinstance(entries, dict)
        or not entries
        or not all(isinstance(s, tuple) and len(s) == 2 for s in entries.values())
    ):
        raise ValueError(f"entries must map names to (heads, width); got {entries!r}")
    for name, (heads, width) in entries.items():
        check_int(heads, f"entries[{name!r}] heads", 1)
        check_int(width, f"entries[{name!r}] width", 1)


def check_room(cache: KVCache, t: int) -> None:
    """Refuse `t` more positions where `cache` has no room for them."""
    if cache.length + t > cache.max_len:
        raise ValueError(
            f"the cache is full: {cache.length} of max_len = "
            f"{cache.max_len} positions used, {t} more asked"
        )


def check_write(cache: KVCache, layer, new: dict) -> None:
    """The arguments of `KVCache.write`: a layer index, and every entry's new
    positions `(b, heads, t, width)` with room for them."""
    check_int(layer, "layer", 0, len(cache.layers) - 1)
    if set(new) != set(cache.entries):
        raise ValueError(
            f"write needs the entries {sorted(cache.entries)}; got {sorted(new)}"
        )
    for name, (heads, width) in cache.entries.items():
        x, shape = new[name], f"(b={cache.batch}, {heads}, t, {width})"
        check_tensor(x, name, shape)
        if x.dim() != 4 or x.shape[:2] + x.shape[3:] != (cache.batch, heads, width):
            raise ValueError(f"{name} must be {shape}; got {tuple(x.shape)}")
        check_room(cache, x.shape[2])


def check_advance(cache: KVCache, t) -> None:
    """The argument of `KVCache.advance`: `t >= 1` positions that fit."""
    check_int(t, "t", 1)
    if cache.length + t > cache.max_len:
        raise ValueError(
            f"the cache is full: cannot advance {t} past max_len = {cache.max_len}"
        )


def kv_cache(
    n_layers: int,
    batch: int,
    max_len: int,
    n_kv_heads: int,
    d_head: int,
    dtype: torch.dtype = torch.float32,
    device=None,
    *,
    rope: Rope | None = None,
    model: torch.nn.Module | None = None,
) -> KVCache:
    """A Transformer's cache: a key and a value of `n_kv_heads × d_head` per layer."""
    kv = (n_kv_heads, d_head)
    config = KVCacheConfig(
        n_layers=n_layers,
        batch=batch,
        max_len=max_len,
        entries={"k": kv, "v": kv},
        dtype=dtype,
        device=device,
    )
    return KVCache(config, rope=rope, model=model)


def attend_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int
) -> torch.Tensor:
    """Causal attention of queries at `start..`; each kv head serves `h/g` query heads.
    Shapes: q (b, h, t, e), k, v (b, g, s, e) -> (b, h, t, e)."""
    check_cached_attention(q, k, v, start)
    group = q.shape[1] // k.shape[1]
    k = repeat(k, "b g s e -> b (g r) s e", r=group)
    v = repeat(v, "b g s e -> b (g r) s e", r=group)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (b, h, t, s)
    t, s = q.shape[2], k.shape[2]
    future = torch.arange(s) > start + torch.arange(t)[:, None]  # (t, s)
    scores = scores.masked_fill(future.to(q.device), float("-inf"))
    return scores.softmax(-1) @ v


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int
) -> torch.Tensor:
    """`attend_reference` through `F.scaled_dot_product_attention` (a fused
    kernel; one decode query needs no mask). Shapes: as `attend_reference`."""
    check_cached_attention(q, k, v, start)
    t, s = q.shape[2], k.shape[2]
    gqa = q.shape[1] != k.shape[1]
    if t == 1:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    if start == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    i, j = torch.arange(t, device=q.device), torch.arange(s, device=q.device)
    seen = j <= start + i[:, None]  # (t, s)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=seen, enable_gqa=gqa)


def check_cached_attention(q, k, v, start) -> None:
    """The arguments of `attend_reference` and `attend`: `t` queries at
    positions `start..start+t-1` over the `s` cached keys."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(x, name, "(b, h, t, e)" if name == "q" else "(b, g, s, e)")
    if not q.dim() == k.dim() == v.dim() == 4:
        raise ValueError("q, k, v must be 4-d tensors (b, h, t, e), (b, g, s, e)")
    (b, h, t, e), (bk, g, s, ek) = q.shape, k.shape
    if k.shape != v.shape or (bk, ek) != (b, e) or h % g:
        raise ValueError(
            f"q must be (b, h, t, e) and k, v (b, g, s, e) with g "
            f"dividing h; got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    if not isinstance(start, int) or start < 0 or start + t != s:
        raise ValueError(
            f"the queries sit at positions start..start+t-1, the last "
            f"key's: start + t must equal s = {s}; got start={start!r}, "
            f"t={t}"
        )


def check_new_cache(model, batch, max_len) -> None:
    """The arguments of `new_cache`: a GPT whose blocks the cached path runs
    exactly, token by token."""
    check_gpt(model)
    check_sizes(batch=batch, max_len=max_len)
    check_token_wise(model, "the cached path")


def new_cache(model: gpt.GPT, batch: int, max_len: int) -> KVCache:
    """An empty cache of `max_len` positions bound to `model`, with its RoPE tables."""
    check_new_cache(model, batch, max_len)
    c, p = model.config, next(model.parameters())
    kv = (c.n_heads, c.d_head)  # a key and a value of every head
    config = KVCacheConfig(
        n_layers=c.n_layers,
        batch=batch,
        max_len=max_len,
        entries={"k": kv, "v": kv},
        dtype=p.dtype,
        device=p.device,
    )
    return KVCache(config, rope=Rope.of_model(model, max_len), model=model)


def cached_forward(model: gpt.GPT, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits of `t` new tokens after the cached ones; caches their keys and values."""
    check_cached_forward(model, ids, cache)
    (b, t), h = ids.shape, model.config.n_heads
    start, x = cache.length, model.embed(ids)  # (b, t, d)
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        qkv = attn.qkv(block.norm1(x)).view(b, t, 3, h, -1)  # (b, t, 3, h, e)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, b, h, t, e)
        q, k = cache.rope(qkv[:2], start)  # q and k at once
        k, v = cache.write(layer, k=k, v=qkv[2])  # (b, h, s, e)
        y = attend(q, k, v, start)  # (b, h, t, e)
        x = x + attn.out(y.transpose(1, 2).reshape(b, t, -1))  # (b, t, d)
        x = x + block.mlp(block.norm2(x))
    cache.advance(t)
    return model.head(model.norm(x))  # (b, t, v)


def check_gpt_ids(model, ids) -> None:
    """The arguments of `recompute_logits`: a RoPE GPT and `(b, t)` token ids."""
    check_gpt(model)
    check_ids(ids, "ids", dims=2)


def check_cached_forward(model, ids, cache) -> None:
    """The arguments of `cached_forward`: a GPT in eval mode (or without dropout),
    `(b, t)` token ids and a cache that `new_cache` made for this very model,
    with room for them inside its RoPE table."""
    if not isinstance(model, gpt.GPT):
        raise TypeError(f"model must be a gpt.GPT; got {type(model).__name__}")
    check_ids(ids, "ids", dims=2)
    if not isinstance(cache, KVCache) or cache.rope is None or cache.model is None:
        raise TypeError(
            f"cache must come from kvcache.new_cache (a KVCache with a rope table and "
            f"a model); got {type(cache).__name__}"
        )
    if cache.model is not model:
        raise ValueError(
            f"the cache was built by new_cache for another model "
            f"({other_model(cache.model, model)}); make one for this model"
        )
    if ids.shape[0] != cache.batch:
        raise ValueError(
            f"ids must be (b={cache.batch}, t) token ids; got {tuple(ids.shape)}"
        )
    check_room(cache, ids.shape[1])
    end = cache.length + ids.shape[1]
    if end > cache.rope.max_len:
        raise ValueError(
            f"positions {cache.length}..{end - 1} are past the model's RoPE tables "
            f"({cache.rope.max_len} positions): they were changed (e.g. by "
            f"rope_scaling.extend) and the cache cannot continue them"
        )
    if model.training and model.config.dropout > 0:
        raise ValueError(
            f"the cached path has no dropout; the model is training with dropout="
            f"{model.config.dropout}: call model.eval()"
        )


def recompute_logits(model: gpt.GPT, ids: torch.Tensor) -> torch.Tensor:
    """The reference: all positions' logits from scratch (an empty cache used once)."""
    check_gpt_ids(model, ids)
    return cached_forward(model, ids, new_cache(model, ids.shape[0], ids.shape[1]))


@torch.inference_mode()
def generate(
    model: gpt.GPT,
    prompt: torch.Tensor,
    n_new: int,
    *,
    use_cache: bool = True,
    forward=None,
) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """Greedy `n_new` tokens, cached or recomputed; `forward` replaces `cached_forward`.
    Returns ids (b, t + n_new), logits (b, n_new, v) and each step's seconds."""
    check_generate(model, prompt, n_new, forward)
    forward = cached_forward if forward is None else forward
    model.eval()
    ids, logits, seconds = prompt, [], []
    b, t = prompt.shape
    cache = new_cache(model, b, t + n_new) if use_cache else None
    new = prompt
    for _ in range(n_new):
        tic = time.perf_counter()
        if use_cache:
            last = forward(model, new, cache)[:, -1]  # (b, v)
        else:
            last = forward(model, ids, new_cache(model, b, ids.shape[1]))[:, -1]
        new = last.argmax(-1, keepdim=True)  # (b, 1)
        seconds.append(time.perf_counter() - tic)
        ids = torch.cat([ids, new], 1)
        logits.append(last)
    return ids, torch.stack(logits, 1), seconds


def check_generate(model, prompt, n_new, forward) -> None:
    """The arguments of `generate`."""
    check_new_cache(model, 1, 1)
    check_ids(prompt, "prompt", dims=2)
    check_int(n_new, "n_new", 1)
    check_positions(model, prompt.shape[1] + n_new - 1, "generate")
    if forward is not None and not callable(forward):
        raise TypeError(
            f"forward must be a function like cached_forward; "
            f"got {type(forward).__name__}"
        )


def simulate_batching(lengths: list[int], max_batch: int, continuous: bool) -> int:
    """The decode steps to finish requests of `lengths[i]` steps each, `max_batch` at
    a time, in order: static batching runs groups of `max_batch` that last as long as
    their longest request; continuous batching starts the next waiting request in a slot
    as soon as the slot's request has finished."""
    check_simulate_batching(lengths, max_batch, continuous)
    if not continuous:
        groups = range(0, len(lengths), max_batch)
        return sum(max(lengths[i : i + max_batch]) for i in groups)
    free_at = [0] * min(max_batch, len(lengths))  # the step after which a slot is free
    for n in lengths:
        heapq.heappush(free_at, heapq.heappop(free_at) + n)
    return max(free_at)


def check_simulate_batching(lengths, max_batch, continuous) -> None:
    """The arguments of `simulate_batching`: a non-empty list of ints >= 1, an int
    `max_batch >= 1` and a bool."""
    check_type(lengths, "lengths", (list, tuple), "a list of ints")
    if not lengths:
        raise ValueError("lengths must hold at least one request; got an empty list")
    for i, n in enumerate(lengths):
        check_int(n, f"lengths[{i}]", 1)
    check_int(max_batch, "max_batch", 1)
    check_bool(continuous, "continuous")


def quantize_kv(x: torch.Tensor, bits: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax quantization of each row (one token of one head) to ints in
    `-(2^(bits-1) - 1)..2^(bits-1) - 1`, stored as int8, with one scale per row.

    Shapes: x `(..., e)` → q `(..., e)` int8, scale `(..., 1)` (x's dtype)."""
    check_quantize_kv(x, bits)
    top = 2 ** (bits - 1) - 1
    absmax = x.abs().amax(-1, keepdim=True)  # (..., 1)
    scale = torch.where(absmax > 0, absmax / top, torch.ones_like(absmax))
    q = (x / scale).round().clamp(-top, top).to(torch.int8)
    return q, scale


def check_quantize_kv(x, bits) -> None:
    """The arguments of `quantize_kv`: a finite float tensor with a last axis, and
    `bits` in `2..8` (the values are stored as int8)."""
    check_tensor(x, "x", "(..., e)")
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must be (..., e) with e >= 1; got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("x must be finite: an inf or NaN has no absmax scale")
    check_int(bits, "bits", 2, 8)


def dequantize_kv(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The values that `quantize_kv` stored: `q · scale`.

    Shapes: q `(..., e)` int8, scale `(..., 1)` → `(..., e)` (scale's dtype)."""
    check_dequantize_kv(q, scale)
    return q.to(scale.dtype) * scale


def check_dequantize_kv(q, scale) -> None:
    """The arguments of `dequantize_kv`: an int8 tensor `(..., e)` and a float
    tensor `(..., 1)` of scales."""
    if not isinstance(q, torch.Tensor) or q.dtype != torch.int8:
        raise TypeError(f"q must be an int8 tensor (..., e); got {describe(q)}")
    check_tensor(scale, "scale", "(..., 1)")
    if q.dim() == 0 or scale.shape != q.shape[:-1] + (1,):
        raise ValueError(
            f"scale must be (..., 1) for q (..., e), one scale per row; got q "
            f"{tuple(q.shape)} and scale {tuple(scale.shape)}"
        )
