"""Chapter 7's experiment: which position scheme lets a model read sequences longer than
those it was trained on.

`PositionalLM` is one small causal language model that takes any of
`positions.SCHEMES`: `"none"`, `"sinusoidal"` or `"learned"` (added to the
embeddings), `"shaw"` (`positions.RelativeAttention`), `"alibi"`
(`positions.alibi_bias` on the scores) or `"rope"` (`positions.Rotary`);
`PositionalLMConfig` holds its sizes. Its blocks are `PreLNBlock` s,
chapter 6's attention followed by a feed-forward network, each with a residual
connection around a LayerNorm: the Pre-LN Transformer block that chapter 8 derives
(`transformer.Block` computes the same), or any other block built around an attention
module. `loss_by_position` evaluates a model on windows of any length.
`T5Bias` is T5's relative position bias, a learned scalar per head and bucket of
the offset `j - i` (`t5_bucket`), added to the scores.

Shapes use `b` batch, `t` positions, `d` width, `h` heads, `v` vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lecturelib.transformers.positions import (
    SCHEMES,
    LearnedPositions,
    RelativeAttention,
    Rotary,
    SinusoidalPositions,
    alibi_bias,
    check_embeddings,
    check_even,
)
from lecturelib.transformers.self_attention import (
    MultiHeadAttention,
    causal_mask,
    check_dropout,
)
from lecturelib.validate import (
    check_bool,
    check_callable,
    check_choice,
    check_ids,
    check_sizes,
    check_type,
    describe,
    is_int_tensor,
)


def check_pre_ln_block(d_model, attn, dropout) -> None:
    """The arguments of `PreLNBlock`."""
    check_sizes(d_model=d_model)
    check_dropout(dropout)
    check_type(
        attn, "attn", nn.Module, "an attention nn.Module (e.g. MultiHeadAttention)"
    )


class PreLNBlock(nn.Module):
    """`x + attn(LN(x))`, then `x + FFN(LN(x))` (GELU, width `4d`); any attention."""

    def __init__(self, d_model: int, attn: nn.Module, dropout: float = 0.0):
        super().__init__()
        check_pre_ln_block(d_model, attn, dropout)
        self.d_model = d_model
        self.attn = attn
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, 4 * d_model),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(4 * d_model, d_model),
        )
        self.norm2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        check_embeddings(x, self.d_model)
        x = x + self.drop(self.attn(self.norm1(x), mask=mask, bias=bias)[0])
        return x + self.drop(self.ffn(self.norm2(x)))


def check_positional_lm_config(c) -> None:
    """The fields of a `PositionalLMConfig`."""
    check_choice(c.scheme, "scheme", SCHEMES)
    check_sizes(
        vocab_size=c.vocab_size,
        d_model=c.d_model,
        n_heads=c.n_heads,
        n_layers=c.n_layers,
        max_len=c.max_len,
        max_distance=c.max_distance,
    )
    if c.d_model % c.n_heads:
        raise ValueError(
            f"d_model must be divisible by n_heads; got d_model="
            f"{c.d_model}, n_heads={c.n_heads}"
        )
    if c.scheme == "rope":
        check_even(c.d_model // c.n_heads, "d_head = d_model / n_heads")
    check_dropout(c.dropout)


@dataclass(kw_only=True)
class PositionalLMConfig:
    """The sizes of a `PositionalLM` and its position `scheme` (`positions.SCHEMES`);
    `max_len`: a learned table's length; `max_distance`: Shaw's clipping distance."""

    vocab_size: int
    scheme: str
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    max_len: int = 64
    max_distance: int = 16
    dropout: float = 0.0

    def __post_init__(self):
        check_positional_lm_config(self)


def check_positional_lm(config, block) -> None:
    """The arguments of `PositionalLM`."""
    check_type(config, "config", PositionalLMConfig, "a PositionalLMConfig")
    if block is not None:
        check_callable(block, "block")


class PositionalLM(nn.Module):
    """A small causal LM with the config's position scheme; `block(attn)` → a block."""

    def __init__(
        self,
        config: PositionalLMConfig,
        block: Callable[[nn.Module], nn.Module] | None = None,
    ):
        super().__init__()
        check_positional_lm(config, block)
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = {
            "sinusoidal": lambda: SinusoidalPositions(c.d_model),
            "learned": lambda: LearnedPositions(c.max_len, c.d_model),
        }.get(c.scheme, nn.Identity)()
        if block is None:

            def block(attn):
                return PreLNBlock(c.d_model, attn, c.dropout)

        self.blocks = nn.ModuleList(block(self.attention()) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size)

    def attention(self) -> nn.Module:
        c = self.config
        if c.scheme == "shaw":
            return RelativeAttention(
                c.d_model, c.n_heads, c.max_distance, dropout=c.dropout
            )
        rotary = Rotary(c.d_model // c.n_heads) if c.scheme == "rope" else None
        return MultiHeadAttention(
            c.d_model, c.n_heads, dropout=c.dropout, rotary=rotary
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, "ids", 2, self.config.vocab_size)
        t = ids.shape[1]
        x = self.pos(self.embed(ids))  # (b, t, d)
        mask = causal_mask(t, device=ids.device)  # (1, t, t)
        bias = (
            alibi_bias(self.config.n_heads, t, device=ids.device)
            if self.config.scheme == "alibi"
            else None
        )  # (h, t, t)
        for block in self.blocks:
            x = block(x, mask, bias)
        return self.head(self.norm(x))  # (b, t, v)


def check_loss_by_position(model, ids, length, batch_size, max_windows) -> None:
    """The arguments of `loss_by_position`: a model with parameters, a stream of
    token ids long enough for one window."""
    if not isinstance(model, nn.Module) or next(model.parameters(), None) is None:
        raise TypeError(
            f"model must be an nn.Module with parameters; got {type(model).__name__}"
        )
    check_ids(ids, "ids", 1)
    check_sizes(length=length, batch_size=batch_size)
    if max_windows is not None:
        check_sizes(max_windows=max_windows)
    if len(ids) - 1 < length:
        raise ValueError(
            f"the stream ({len(ids)} tokens) is shorter than one window of {length + 1}"
        )


@torch.no_grad()
def loss_by_position(
    model: nn.Module,
    ids: torch.Tensor,
    length: int,
    batch_size: int = 16,
    max_windows: int | None = None,
) -> torch.Tensor:
    """Mean next-token loss (nats) at each position of `length + 1`-token windows."""
    check_loss_by_position(model, ids, length, batch_size, max_windows)
    n = (len(ids) - 1) // length
    n = n if max_windows is None else min(n, max_windows)
    device = next(model.parameters()).device
    starts = torch.arange(n) * length
    total = torch.zeros(length, dtype=torch.float64)
    for chunk in starts.split(batch_size):
        idx = chunk[:, None] + torch.arange(length + 1)  # (b, length + 1)
        window = ids[idx].to(device)
        logits = model(window[:, :-1])  # (b, length, v)
        loss = F.cross_entropy(
            logits.transpose(1, 2).float(), window[:, 1:], reduction="none"
        )  # (b, length)
        total += loss.sum(0).double().cpu()
    return (total / n).float()


def check_t5_buckets(bidirectional, n_buckets, max_distance) -> None:
    """T5's bucket sizes: enough buckets for at least one exact distance, and
    `max_distance` beyond the exact ones."""
    check_bool(bidirectional, "bidirectional")
    check_sizes(n_buckets=n_buckets, max_distance=max_distance)
    exact = (n_buckets // 2 if bidirectional else n_buckets) // 2
    if exact < 1 or max_distance <= exact:
        need = 4 if bidirectional else 2
        raise ValueError(
            f"n_buckets must be >= {need} {'with' if bidirectional else 'without'} "
            f"bidirectional, and max_distance above its {exact} exact distances; got "
            f"n_buckets={n_buckets}, max_distance={max_distance}"
        )


def check_t5_bucket(relative, bidirectional, n_buckets, max_distance) -> None:
    """The arguments of `t5_bucket`: integer offsets `j - i` and valid sizes."""
    if not is_int_tensor(relative):
        raise TypeError(
            f"relative must be an integer tensor of offsets j - i; got "
            f"{describe(relative)}"
        )
    check_t5_buckets(bidirectional, n_buckets, max_distance)


def t5_bucket(
    relative: torch.Tensor,
    bidirectional: bool = True,
    n_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket of each offset `j - i`: exact if near, log-spaced to max_distance."""
    check_t5_bucket(relative, bidirectional, n_buckets, max_distance)
    if bidirectional:
        n_buckets //= 2
        bucket = (relative > 0).long() * n_buckets  # keys after the query: upper half
        distance = relative.abs()
    else:
        bucket = torch.zeros_like(relative, dtype=torch.long)
        distance = (-relative).clamp(min=0)  # keys before the query
    exact = n_buckets // 2
    log_ratio = torch.log(distance.clamp(min=exact).float() / exact) / math.log(
        max_distance / exact
    )  # 0 at distance `exact`, 1 at `max_distance`
    wide = exact + (log_ratio * (n_buckets - exact)).long()
    wide = wide.clamp(max=n_buckets - 1)
    return bucket + torch.where(distance < exact, distance, wide)


def check_t5_bias(n_heads, n_buckets, max_distance, bidirectional) -> None:
    """The arguments of `T5Bias`."""
    check_sizes(n_heads=n_heads)
    check_t5_buckets(bidirectional, n_buckets, max_distance)


class T5Bias(nn.Module):
    """T5's learned bias per head and `t5_bucket` of `j - i` (query `i` at `i + s - t`).
    Shapes: → `(h, t, s)`, to pass as `bias` to attention."""

    def __init__(
        self, n_heads: int, n_buckets=32, max_distance=128, bidirectional=True
    ):
        super().__init__()
        check_t5_bias(n_heads, n_buckets, max_distance, bidirectional)
        self.n_buckets, self.max_distance = n_buckets, max_distance
        self.bidirectional = bidirectional
        self.table = nn.Embedding(n_buckets, n_heads)  # one scalar per bucket and head

    def forward(self, t: int, s: int | None = None) -> torch.Tensor:
        s = t if s is None else s
        check_sizes(t=t, s=s)
        device = self.table.weight.device
        i = torch.arange(t, device=device)[:, None] + (s - t)  # query positions
        j = torch.arange(s, device=device)[None, :]  # key positions
        bucket = t5_bucket(j - i, self.bidirectional, self.n_buckets, self.max_distance)
        return rearrange(self.table(bucket), "t s h -> h t s")
