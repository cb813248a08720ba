"""Chapter 14: attention that caches less, and a small GPT built on it.

- `GroupedQueryAttention`: `n_kv_heads = g` key/value heads, each shared by
  `n_heads / g` query heads (Ainslie et al., arXiv:2305.13245); `g = n_heads` is
  multi-head attention, `g = 1` multi-query attention (Shazeer, arXiv:1911.02150).
- `LatentAttention`: multi-head latent attention (DeepSeek-V2, arXiv:2405.04434).
  The cache holds a latent `c_t = W_DKV h_t` of width `d_c` and one RoPE key of
  width `d_R` shared by the heads; keys and values are up-projected from `c_t`.
  `absorbed=True` runs the inference form, with `W_UK` folded into the queries and
  `W_UV` into the output, so that attention reads the latents directly. DeepSeek-V2
  also compresses the queries through a latent (to save activation memory in training);
  we project them directly.
- `CacheGPT`: chapter 11's GPT with either attention, each block reading and
  writing a `lecturelib.efficiency.kvcache.KVCache`.

Shapes: `b` batch, `t` new positions, `s` cached positions, `h` query heads,
`g` key/value heads, `e` d_head, `c` d_latent, `r` d_rope, `d` d_model, `v`
vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from torch import nn

from lecturelib.efficiency import kvcache
from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_choice,
    check_ids,
    check_int,
    check_tensor,
    check_type,
    describe,
)

ATTENTIONS = ("gqa", "mla")


@dataclass
class CacheGPTConfig:
    """A `CacheGPT`: chapter 11's sizes plus the attention's cache options."""

    vocab_size: int
    seq_len: int = 64
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    attention: str = "gqa"  # "gqa" (n_kv_heads = n_heads: MHA, 1: MQA) or "mla"
    n_kv_heads: int = 4
    d_latent: int = 16  # MLA: d_c
    d_rope: int = 8  # MLA: d_h^R
    rope_base: float = 10000.0

    def __post_init__(self):
        check_cache_gpt_config(self)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def cache_entries(self) -> dict:
        """What one layer caches per token: `{name: (heads, width)}`."""
        if self.attention == "mla":
            return {"c": (1, self.d_latent), "k_rope": (1, self.d_rope)}
        kv = (self.n_kv_heads, self.d_head)
        return {"k": kv, "v": kv}


def check_cache_gpt_config(c: CacheGPTConfig) -> None:
    """The fields of a `CacheGPTConfig`."""
    for name in (
        "vocab_size",
        "seq_len",
        "d_model",
        "n_layers",
        "n_heads",
        "n_kv_heads",
        "d_latent",
        "d_rope",
    ):
        check_int(getattr(c, name), f"CacheGPTConfig.{name}", 1)
    check_choice(c.attention, "CacheGPTConfig.attention", ATTENTIONS)
    if c.d_model % c.n_heads or c.d_head % 2 or c.d_rope % 2:
        raise ValueError(
            f"d_model ({c.d_model}) must split into n_heads ({c.n_heads}) heads of "
            f"even width, and d_rope ({c.d_rope}) must be even"
        )
    if c.n_heads % c.n_kv_heads:
        raise ValueError(
            f"n_kv_heads ({c.n_kv_heads}) must divide n_heads ({c.n_heads})"
        )


def check_attention_config(config, attention: str) -> None:
    """`config` must be a `CacheGPTConfig` (checked again: a field changed after
    construction is caught here) whose `attention` is the layer's `attention`."""
    check_type(config, "config", CacheGPTConfig, "a CacheGPTConfig")
    check_cache_gpt_config(config)
    if config.attention != attention:
        raise ValueError(
            f"config.attention must be {attention!r} for this layer; got "
            f"{config.attention!r}"
        )


class GroupedQueryAttention(nn.Module):
    """Causal RoPE attention with `n_kv_heads` key/value heads: cache (b, g, s, e)."""

    def __init__(self, config: CacheGPTConfig):
        super().__init__()
        check_attention_config(config, "gqa")
        c = config
        self.n_heads, self.n_kv_heads, self.d_head = c.n_heads, c.n_kv_heads, c.d_head
        self.q_proj = nn.Linear(c.d_model, c.n_heads * c.d_head, bias=False)
        self.kv_proj = nn.Linear(c.d_model, 2 * c.n_kv_heads * c.d_head, bias=False)
        self.out = nn.Linear(c.n_heads * c.d_head, c.d_model, bias=False)

    def forward(self, x, cache: kvcache.KVCache, layer: int, rope: kvcache.Rope):
        start = cache.length
        q = rearrange(self.q_proj(x), "b t (h e) -> b h t e", h=self.n_heads)
        k, v = rearrange(
            self.kv_proj(x), "b t (two g e) -> two b g t e", two=2, g=self.n_kv_heads
        )  # (b, g, t, e) each
        k, v = cache.write(layer, k=rope(k, start), v=v)  # (b, g, s, e)
        y = kvcache.attend(rope(q, start), k, v, start)  # (b, h, t, e)
        return self.out(rearrange(y, "b h t e -> b t (h e)"))


class LatentAttention(nn.Module):
    """MLA with decoupled RoPE keys; caches c (b, 1, s, c) and k_rope (b, 1, s, r)."""

    def __init__(self, config: CacheGPTConfig):
        super().__init__()
        check_attention_config(config, "mla")
        c = config
        self.n_heads, self.d_head, self.d_rope = c.n_heads, c.d_head, c.d_rope
        self.down = nn.Linear(c.d_model, c.d_latent, bias=False)  # W_DKV
        self.up_k = nn.Linear(c.d_latent, c.n_heads * c.d_head, bias=False)  # W_UK
        self.up_v = nn.Linear(c.d_latent, c.n_heads * c.d_head, bias=False)  # W_UV
        self.q_proj = nn.Linear(c.d_model, c.n_heads * c.d_head, bias=False)  # W_Q
        self.q_rope = nn.Linear(c.d_model, c.n_heads * c.d_rope, bias=False)  # W_QR
        self.k_rope = nn.Linear(c.d_model, c.d_rope, bias=False)  # W_KR
        self.out = nn.Linear(c.n_heads * c.d_head, c.d_model, bias=False)  # W_O

    def forward(
        self,
        x,
        cache: kvcache.KVCache,
        layer: int,
        rope: kvcache.Rope,
        absorbed: bool = False,
    ):
        start, h = cache.length, self.n_heads
        c_new = rearrange(self.down(x), "b t c -> b 1 t c")
        kr_new = rope(rearrange(self.k_rope(x), "b t r -> b 1 t r"), start)
        c, k_r = cache.write(layer, c=c_new, k_rope=kr_new)  # (b, 1, s, c), (.., r)
        q = rearrange(self.q_proj(x), "b t (h e) -> b h t e", h=h)
        q_r = rope(rearrange(self.q_rope(x), "b t (h r) -> b h t r", h=h), start)
        scale = 1 / math.sqrt(self.d_head + self.d_rope)
        rope_scores = einsum(q_r, k_r[:, 0], "b h t r, b s r -> b h t s")
        if absorbed:
            y = self.absorbed(q, c[:, 0], rope_scores, scale, start)
        else:
            y = self.explicit(q, c[:, 0], rope_scores, scale, start)
        return self.out(rearrange(y, "b h t e -> b t (h e)"))

    def explicit(self, q, c, rope_scores, scale, start):
        """Keys and values up-projected from every cached latent: -> (b, h, t, e)."""
        k = rearrange(self.up_k(c), "b s (h e) -> b h s e", h=self.n_heads)
        v = rearrange(self.up_v(c), "b s (h e) -> b h s e", h=self.n_heads)
        scores = einsum(q, k, "b h t e, b h s e -> b h t s") + rope_scores
        return causal_softmax(scores * scale, start) @ v

    def absorbed(self, q, c, rope_scores, scale, start):
        """Queries in latent space (`W_UKᵀ q`), `W_UV` applied once per query."""
        w_uk = rearrange(self.up_k.weight, "(h e) c -> h e c", h=self.n_heads)
        w_uv = rearrange(self.up_v.weight, "(h e) c -> h e c", h=self.n_heads)
        q_latent = einsum(q, w_uk, "b h t e, h e c -> b h t c")
        scores = einsum(q_latent, c, "b h t c, b s c -> b h t s") + rope_scores
        y_latent = causal_softmax(scores * scale, start) @ c[:, None]  # (b, h, t, c)
        return einsum(y_latent, w_uv, "b h t c, h e c -> b h t e")


def check_causal_softmax(scores, start) -> None:
    """The arguments of `causal_softmax`: float scores `(b, h, t, s)` of `t`
    new queries over `s = start + t` keys, `start >= 0` of them cached before."""
    check_tensor(scores, "scores", "(b, h, t, s)", dims=4)
    check_int(start, "start", 0)
    t, s = scores.shape[-2:]
    if start + t != s:
        raise ValueError(
            f"scores must have s = start + t keys; got s = {s} for start = {start}, "
            f"t = {t}"
        )


def causal_softmax(scores: torch.Tensor, start: int) -> torch.Tensor:
    """Softmax over keys `0..start+i` for query `i`. Shapes: `(b, h, t, s)` →
    same."""
    check_causal_softmax(scores, start)
    t, s = scores.shape[-2:]
    future = (
        torch.arange(s, device=scores.device)
        > start + torch.arange(t, device=scores.device)[:, None]
    )
    return scores.masked_fill(future, float("-inf")).softmax(-1)


class CacheBlock(nn.Module):
    """chapter 11's Pre-LN block around either attention."""

    def __init__(self, config: CacheGPTConfig):
        super().__init__()
        check_type(config, "config", CacheGPTConfig, "a CacheGPTConfig")
        mlp_config = gpt.GPTConfig(vocab_size=1, d_model=config.d_model, n_heads=1)
        self.norm1, self.norm2 = (
            nn.RMSNorm(config.d_model, eps=1e-6),
            nn.RMSNorm(config.d_model, eps=1e-6),
        )
        self.attn = (
            LatentAttention(config)
            if config.attention == "mla"
            else GroupedQueryAttention(config)
        )
        self.mlp = gpt.MLP(mlp_config)

    def forward(self, x, cache, layer, rope, **options):
        x = x + self.attn(self.norm1(x), cache, layer, rope, **options)
        return x + self.mlp(self.norm2(x))


class CacheGPT(nn.Module):
    """A GPT whose attention is GQA/MQA/MHA or MLA; every forward runs on a cache (a
    fresh one when none is given, which is full recomputation).

    Shapes: ids `(b, t)` → logits `(b, t, v)`.
    """

    def __init__(self, config: CacheGPTConfig):
        super().__init__()
        check_type(config, "config", CacheGPTConfig, "a CacheGPTConfig")
        check_cache_gpt_config(config)
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(CacheBlock(config) for _ in range(config.n_layers))
        self.norm = nn.RMSNorm(config.d_model, eps=1e-6)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.head.weight = self.embed.weight
        self.apply(gpt.GPT.init_weights)
        std = 0.02 / math.sqrt(2 * config.n_layers)  # residual branches, as gpt.GPT
        for block in self.blocks:
            nn.init.normal_(block.attn.out.weight, std=std)
            nn.init.normal_(block.mlp.down.weight, std=std)

    def new_cache(self, batch: int, max_len: int) -> kvcache.KVCache:
        """An empty cache of `max_len` positions, with the RoPE table it needs."""
        c = self.config
        p = self.embed.weight
        width = c.d_rope if c.attention == "mla" else c.d_head
        rope = kvcache.Rope(width, max_len, c.rope_base, p.device)
        config = kvcache.KVCacheConfig(
            n_layers=c.n_layers,
            batch=batch,
            max_len=max_len,
            entries=c.cache_entries(),
            dtype=p.dtype,
            device=p.device,
        )
        return kvcache.KVCache(config, rope=rope, model=self)  # the model that built it

    def forward(
        self, ids: torch.Tensor, cache: kvcache.KVCache | None = None, **options
    ) -> torch.Tensor:
        if cache is None:
            cache = self.new_cache(ids.shape[0], ids.shape[1])
        check_cache_gpt_forward(self, ids, cache)
        x = self.embed(ids)  # (b, t, d)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer, cache.rope, **options)
        cache.advance(ids.shape[1])
        return self.head(self.norm(x))  # (b, t, v)


def check_cache_gpt_forward(model: CacheGPT, ids, cache) -> None:
    """The arguments of `CacheGPT.forward`: token ids `(b, t)` of the vocabulary
    and a cache this model built, with room for `t` more positions."""
    check_ids(ids, "ids", dims=2, vocab_size=model.config.vocab_size)
    if getattr(cache, "model", None) is not model:
        raise ValueError(
            "cache was built by another model; make one with this model's new_cache"
        )
    kvcache.check_room(cache, ids.shape[1])
    if cache.batch != ids.shape[0]:
        raise ValueError(
            f"ids has batch {ids.shape[0]} but the cache was built for {cache.batch}"
        )


def check_loss(model, batch) -> None:
    """The arguments of `loss`: a `CacheGPT` and a pair `(x, y)` of token
    ids `(b, t)` of one shape, `y` in the model's vocabulary (read once per call:
    an id out of range would stop a GPU with a device-side assert)."""
    ddp = isinstance(model, nn.parallel.DistributedDataParallel)
    net = model.module if ddp else model  # train.fit's model when distributed
    check_type(net, "model", CacheGPT, "a CacheGPT")
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(
            f"batch must be a pair (x, y) of (b, t) ids; got {describe(batch)}"
        )
    x, y = batch
    check_ids(y, "y", dims=2, vocab_size=net.config.vocab_size)
    check_type(x, "x", torch.Tensor, "a (b, t) tensor of token ids")
    if y.shape != x.shape:
        raise ValueError(
            f"y must have the shape of x {tuple(x.shape)}; got {tuple(y.shape)}"
        )


def loss(model: CacheGPT, batch) -> torch.Tensor:
    """Next-token cross-entropy of `model` on `(x, y)`."""
    check_loss(model, batch)
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())
