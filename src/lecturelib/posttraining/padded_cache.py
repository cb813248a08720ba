"""Chapter 21: batched decoding of left-padded prompts with a KV cache.

`chat.respond` and `chat.group_sampler` decode many prompts as one batch, each
left-padded to the longest with a segment of its own (segment 0) so that
`GPT(ids, segments)` restarts each row's positions at its first real token and
hides the padding. `PaddedDecoder` gives the same next-token logits as that
forward, without recomputing the prefix: a *prefill* of the padded prompts through
`gpt.GPT`'s own modules, storing every layer's keys and values in chapter 14's
`kvcache.KVCache`, then one *decode* step per new token, each row's token at its own
position, attending to the cached keys of its own segment. Rows that stopped are
dropped from the cache, so only the rows still writing are computed.

It runs a plain `gpt.GPT` in eval mode (or without dropout) only (`runs`);
`decoder` falls back to the full forward for anything else (a subclass, LoRA or
adapter layers, hooks, a MoE, dropout while training), which computes what that
model's own forward computes.

Shapes: `b` batch, `a` active rows, `t` positions, `s` cached positions, `h`
heads, `e` d_head, `v` vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lecturelib.efficiency import kvcache
from lecturelib.pretraining import gpt
from lecturelib.validate import check_int, describe, is_int_tensor

PLAIN = (  # the module types whose computation the cached path repeats exactly
    gpt.GPT,
    gpt.Block,
    gpt.CausalSelfAttention,
    gpt.MLP,
    nn.ModuleList,
    nn.Embedding,
    nn.Linear,
    nn.LayerNorm,
    nn.RMSNorm,
    nn.Dropout,
)


def runs(model) -> bool:
    """Whether the cached path computes what `model(ids, segments)` computes: a
    `gpt.GPT` built of its own module types only (no subclass, LoRA, adapter or MoE),
    without hooks, and with no dropout active."""
    if type(model) is not gpt.GPT:
        return False
    for m in model.modules():
        if type(m) not in PLAIN or m._forward_hooks or m._forward_pre_hooks:
            return False
        if m.training and isinstance(m, nn.Dropout) and m.p > 0:
            return False
    return not (model.training and model.config.dropout > 0)  # attention's dropout


def decoder(model: gpt.GPT, max_len: int):
    """A function `(ids, segments, rows) -> logits` of the next token of each of the
    `rows` of a left-padded batch: `PaddedDecoder` where `runs`, the full
    forward `model(ids[rows], segments[rows])[:, -1]` otherwise.

    Shapes: ids, segments `(b, t)`, rows `(a,)` → `(a, v)`."""
    check_decoder(model, max_len)
    if runs(model):
        return PaddedDecoder(model, max_len)
    return lambda ids, segments, rows: model(ids[rows], segments[rows])[:, -1]


def check_step(decoder: PaddedDecoder, ids, segments, rows) -> None:
    """ids and segments `(b, t)`, `t` one more than at the previous call (after
    the prefill); `rows` a 1-d CPU integer tensor of distinct rows in `0..b-1`,
    each one that the previous call read."""
    for x, name in ((ids, "ids"), (segments, "segments")):  # no look at the values:
        if not is_int_tensor(x) or x.dim() != 2:  # no wait for the device per token
            raise TypeError(f"{name} must be a 2-D integer tensor; got {describe(x)}")
    if segments.shape != ids.shape:
        raise ValueError(
            f"segments {tuple(segments.shape)} must have the shape of ids "
            f"{tuple(ids.shape)}"
        )
    if not is_int_tensor(rows):
        raise TypeError(f"rows must be an integer tensor (a,); got {describe(rows)}")
    if rows.dim() != 1 or not len(rows) or rows.device.type != "cpu":
        raise ValueError(
            f"rows must be a 1-D CPU tensor of one row index or more; got "
            f"{describe(rows)} on {rows.device}"
        )
    wanted = rows.tolist()
    if len(set(wanted)) != len(wanted) or not all(0 <= r < len(ids) for r in wanted):
        raise ValueError(
            f"rows must be distinct row indices in 0..{len(ids) - 1}; got {wanted}"
        )
    if decoder.cache is None:
        return
    if ids.shape[1] != decoder.cache.length + 1:
        raise ValueError(
            f"each call after the first reads one new token: ids must have "
            f"{decoder.cache.length + 1} positions; got {ids.shape[1]}"
        )
    gone = [r for r in wanted if r not in decoder.rows]
    if gone:
        raise ValueError(
            f"rows {gone} are not in the cache, which holds rows {decoder.rows}: a "
            "decode step reads only rows that the previous call read"
        )


def check_decoder(model, max_len) -> None:
    """A GPT and a `max_len` of 1 to the model's `seq_len` positions."""
    gpt.check_gpt(model)
    check_int(max_len, "max_len", 1)
    if max_len > model.config.seq_len:
        raise ValueError(
            f"max_len must be at most the model's seq_len = {model.config.seq_len}; "
            f"got {max_len}"
        )


class PaddedDecoder:
    """Next-token logits of a left-padded batch whose rows grow by one token per call:
    the first call prefills the cache with the whole batch, each later one reads only
    the newest token of each of `rows` (the rows still writing: rows that an earlier
    call read, in any order), after dropping the others from the cache and putting the
    rest in the order of `rows`.

    Shapes: ids, segments `(b, t)`, rows `(a,)` → `(a, v)`."""

    def __init__(self, model: gpt.GPT, max_len: int):
        self.model, self.max_len = model, max_len
        self.cache = self.rows = None

    def __call__(self, ids, segments, rows) -> torch.Tensor:
        check_step(self, ids, segments, rows)
        ids, segments = ids[rows], segments[rows]  # (a, t)
        if self.cache is None:  # prefill: the model's forward over the padded batch
            c, p = self.model.config, next(self.model.parameters())
            sizes = (c.n_layers, len(rows), self.max_len, c.n_heads, c.d_head)
            self.cache = kvcache.kv_cache(*sizes, p.dtype, p.device)
            self.device = p.device
            positions, mask = gpt.segment_positions_and_mask(segments, ids)
        else:  # decode: the newest token of each row, at its own position
            self.keep(rows)
            same = segments == segments[:, -1:]  # (a, t): the keys of its segment
            positions = same.sum(1, keepdim=True) - 1  # (a, 1)
            mask, ids = same[:, None, None], ids[:, -1:]  # (a, 1, 1, t), (a, 1)
        self.rows = rows.tolist()
        return self.forward(ids, positions, mask)[:, -1]

    def keep(self, rows: torch.Tensor) -> None:
        """Keep in the cache the rows `rows` (each one it holds), in their order."""
        if rows.tolist() == self.rows:
            return
        at = {r: i for i, r in enumerate(self.rows)}  # where the cache holds each row
        keep = torch.tensor([at[r] for r in rows.tolist()], device=self.device)
        self.cache.layers = [
            {name: x.index_select(0, keep) for name, x in layer.items()}
            for layer in self.cache.layers
        ]
        self.cache.batch = len(rows)

    def forward(self, ids, positions, mask) -> torch.Tensor:
        """`gpt.GPT.forward` on `t` new tokens after the cached ones: the same
        modules in the same order, the keys and values written to the cache.

        Shapes: ids, positions `(a, t)`, mask `(a, 1, t, s)` → `(a, t, v)`."""
        model, cache = self.model, self.cache
        x = model.embed_ids(ids, positions)  # (a, t, d)
        for layer, block in enumerate(model.blocks):
            attn = block.attn
            q, k, v = rearrange(
                attn.qkv(block.norm1(x)),
                "b t (three h e) -> three b h t e",
                three=3,
                h=attn.n_heads,
            )  # (a, h, t, e) each
            if attn.rope:
                q, k = attn.rotate(q, positions), attn.rotate(k, positions)
            k, v = cache.write(layer, k=k, v=v)  # (a, h, s, e)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            y = attn.out(rearrange(y, "b h t e -> b t (h e)"))
            x = x + block.drop(y)
            x = x + block.drop(block.mlp(block.norm2(x)))
        cache.advance(ids.shape[1])
        return model.head(model.norm(x))  # (a, t, v)
