"""Chapter 8: the Transformer (Vaswani et al., 2017, arXiv:1706.03762).

A `Block` is multi-head self-attention (`self_attention.MultiHeadAttention`),
optional cross-attention to an encoder's output, and a position-wise
`FeedForward` `d → d_ff → d` (`d_ff = 4d` by default), each sub-layer wrapped
in a residual connection and a LayerNorm:

- Post-LN (the original paper): `x = LN(x + sublayer(x))`;
- Pre-LN (Xiong et al., 2020, arXiv:2002.04745; GPT-2 and most models since):
  `x = x + sublayer(LN(x))`.

A block's sizes and its order are the fields of a `StackConfig` (`Block(config)`):
`norm_first` chooses Pre-LN, `residual=False` drops the skip connections (for the
chapter's gradient-norm experiment). Keywords choose the rest: `attn` replaces the
self-attention module by any module with the same call signature (chapter 7's
relative-position attention); `norm` builds the normalisation layers (`nn.LayerNorm`
by default, or `RMSNorm`).

`LayerNorm` is the formula of Ba et al. (2016, arXiv:1607.06450) written out;
`RMSNorm` is Zhang & Sennrich (2019, arXiv:1910.07467).

Models are built from a `@dataclass` config passed by keyword (as in nanoGPT):
`StackConfig`, the sizes of a block and of a stack of blocks (`stack`), and
`TransformerConfig`, which extends it for the token models; the Vision Transformer,
built from the same stack, is in `vit`.

The three architectures, from the same blocks:

- encoder-only (`TransformerEncoder`: every position sees every other);
- decoder-only (`TransformerLM`: a causal mask);
- encoder–decoder (`make_seq2seq`: `TransformerEncoder` +
  `TransformerDecoder`, whose blocks cross-attend to the encoder's output). It
  plugs into `seq2seq.Seq2Seq`, so `seq2seq.greedy_decode` and `seq2seq.evaluate`
  (BLEU) serve it too: its decoder's "state" is the whole prefix, which it re-reads at
  every step (chapter 14 caches keys and values instead). Positions are learned, as in
  BERT and GPT; the paper used sinusoids (chapter 7 compares the schemes).

Masks follow the package's convention (`self_attention`): bool, True = may attend,
`(b, t, s)` with `b` and `t` possibly 1: a causal mask is `(1, t, t)`, a padding
mask `(b, 1, s)`.

Shapes use `b` batch, `t` positions, `s` encoder positions, `d` width, `v`
vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from lecturelib.recurrence import rnn, seq2seq
from lecturelib.recurrence.seq2seq import check_lengths
from lecturelib.transformers.self_attention import (
    MultiHeadAttention,
    causal_mask,
    check_dropout,
    padding_mask,
)
from lecturelib.validate import check_ids, check_sizes, check_type


def check_width(x, d_model: int, axes: str = "(..., d_model)") -> None:
    """Raise a ValueError unless `x` is a tensor whose last axis has `d_model`
    features."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be {axes} with d_model={d_model}; got {got}")


class LayerNorm(nn.Module):
    """`LN(x) = γ ⊙ (x − μ) / √(σ² + ε) + β`, `μ`, `σ²` (biased) over the last axis."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # γ
        self.bias = nn.Parameter(torch.zeros(d_model))  # β

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_width(x, len(self.weight))
        mu = x.mean(-1, keepdim=True)  # (..., 1)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)  # (..., 1)
        return self.weight * (x - mu) / torch.sqrt(var + self.eps) + self.bias


class RMSNorm(nn.Module):
    """`RMSNorm(x) = γ ⊙ x / √(mean(x²) + ε)` over the last axis."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_width(x, len(self.weight))
        return self.weight * x * torch.rsqrt((x**2).mean(-1, keepdim=True) + self.eps)


def check_stack_config(c) -> None:
    """The fields of a `StackConfig` (of any of its subclasses)."""
    check_sizes(d_model=c.d_model, n_heads=c.n_heads, n_layers=c.n_layers)
    if c.d_ff is not None:
        check_sizes(d_ff=c.d_ff)
    if c.d_model % c.n_heads:
        raise ValueError(
            f"{type(c).__name__}: d_model must be divisible by n_heads; got "
            f"d_model={c.d_model}, n_heads={c.n_heads}"
        )
    check_dropout(c.dropout)


@dataclass(kw_only=True)
class StackConfig:
    """The sizes of a block and of a stack of them; `d_ff=None` means `4 * d_model`."""

    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 3
    d_ff: int | None = None
    dropout: float = 0.0
    norm_first: bool = True
    residual: bool = True

    def __post_init__(self):
        check_stack_config(self)


def check_config(config, kind: type) -> None:
    """Raise a TypeError unless `config` is a `kind` (a config dataclass)."""
    check_type(config, "config", kind, f"a {kind.__name__}")


class FeedForward(nn.Module):
    """`FFN(x) = W_2 act(W_1 x + b_1) + b_2` applied to every position on its own."""

    def __init__(self, config: StackConfig, *, activation: type[nn.Module] = nn.GELU):
        super().__init__()
        check_config(config, StackConfig)
        c = config
        d_ff = c.d_ff or 4 * c.d_model
        self.net = nn.Sequential(
            nn.Linear(c.d_model, d_ff),
            activation(),
            nn.Dropout(c.dropout),
            nn.Linear(d_ff, c.d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_width(x, self.net[0].in_features)
        return self.net(x)


def check_block_input(x, d_model: int, memory, cross: bool) -> None:
    """The input of a `Block`: `x` `(b, t, d_model)`, and `memory` exactly
    when the block cross-attends."""
    if (memory is None) == cross:
        raise ValueError(
            "memory: a block built with cross=True needs memory (the "
            "encoder output), and one without it takes none; got "
            f"{'none' if memory is None else 'memory'}"
        )
    check_width(x, d_model, "(b, t, d_model)")
    if x.dim() != 3:
        raise ValueError(f"x must be (b, t, d_model); got {tuple(x.shape)}")


class Block(nn.Module):
    """Self-attention (+ cross-attention if `cross`) + feed-forward, Pre-LN or Post-LN.
    Shapes: x `(b, t, d)`, memory `(b, s, d)`, masks `(b, t, t|s)` → `(b, t, d)`."""

    def __init__(
        self, config: StackConfig, *, cross=False, attn=None, norm=nn.LayerNorm
    ):
        super().__init__()
        check_config(config, StackConfig)
        c = config
        self.d_model = c.d_model
        self.norm_first, self.residual = c.norm_first, c.residual

        def attention():
            return MultiHeadAttention(c.d_model, c.n_heads, dropout=c.dropout)

        self.attn = attention() if attn is None else attn
        self.norm1 = norm(c.d_model)
        self.cross = attention() if cross else None
        self.norm_cross = norm(c.d_model) if cross else None
        self.ffn = FeedForward(c)
        self.norm2 = norm(c.d_model)
        self.drop = nn.Dropout(c.dropout)

    def sublayer(self, x: torch.Tensor, norm: nn.Module, f) -> torch.Tensor:
        """One "Add & Norm" around `f`, in this block's order."""
        if self.norm_first:
            y = self.drop(f(norm(x)))
            return x + y if self.residual else y
        y = self.drop(f(x))
        return norm(x + y if self.residual else y)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        check_block_input(x, self.d_model, memory, self.cross is not None)
        x = self.sublayer(
            x, self.norm1, lambda h: self.attn(h, mask=mask, bias=bias)[0]
        )
        if self.cross is not None:
            x = self.sublayer(
                x, self.norm_cross, lambda h: self.cross(h, memory, memory_mask)[0]
            )
        return self.sublayer(x, self.norm2, self.ffn)


def check_grad_blocks(blocks) -> None:
    """The argument of `layer_grad_norms`: blocks that all have gradients."""
    if not isinstance(blocks, nn.ModuleList) or len(blocks) == 0:
        raise TypeError(
            f"blocks must be a non-empty nn.ModuleList; got {type(blocks).__name__}"
        )
    if any(all(p.grad is None for p in block.parameters()) for block in blocks):
        raise ValueError("blocks: a block has no gradients; call loss.backward() first")


def layer_grad_norms(blocks: nn.ModuleList) -> torch.Tensor:
    """The L2 norm of the gradient of each block's parameters (after `backward`)."""
    check_grad_blocks(blocks)
    norms = []
    for block in blocks:
        grads = [p.grad.flatten() for p in block.parameters() if p.grad is not None]
        norms.append(torch.cat(grads).norm())
    return torch.stack(norms)


def check_embedding_input(ids, vocab_size: int, max_len: int) -> None:
    """The token ids `(b, t)` of an `Embedding`, at most `max_len` of them."""
    check_ids(ids, "ids", 2, vocab_size)
    if ids.shape[1] > max_len:
        raise ValueError(
            f"ids must be (b, t) with t <= max_len={max_len}; got {tuple(ids.shape)}"
        )


class Embedding(nn.Module):
    """Token embedding plus a learned embedding of each position `0 .. max_len-1`."""

    def __init__(
        self, vocab_size: int, d_model: int, max_len: int, dropout: float = 0.0
    ):
        super().__init__()
        self.max_len = max_len
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_embedding_input(ids, self.tok.num_embeddings, self.max_len)
        positions = torch.arange(ids.shape[1], device=ids.device)  # (t,)
        return self.drop(self.tok(ids) + self.pos(positions))  # (b, t, d)


def check_transformer_config(c) -> None:
    """The fields of a `TransformerConfig`."""
    check_stack_config(c)
    check_sizes(vocab_size=c.vocab_size, max_len=c.max_len)


@dataclass(kw_only=True)
class TransformerConfig(StackConfig):
    vocab_size: int
    max_len: int = 64

    def __post_init__(self):
        check_transformer_config(self)


def stack(config: StackConfig, *, cross: bool = False) -> nn.ModuleList:
    """`config.n_layers` blocks; a Pre-LN stack's output still needs a final norm."""
    check_config(config, StackConfig)
    return nn.ModuleList(Block(config, cross=cross) for _ in range(config.n_layers))


class TransformerLM(nn.Module):
    """Decoder-only: embeddings → causal blocks → (final norm) → logits."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        check_config(config, TransformerConfig)
        c = self.config = config
        self.embed = Embedding(c.vocab_size, c.d_model, c.max_len, c.dropout)
        self.blocks = stack(c)
        self.norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.head = nn.Linear(c.d_model, c.vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)  # (b, t, d)
        mask = causal_mask(ids.shape[1], device=ids.device)  # (1, t, t)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))  # (b, t, v)


def check_source(src, src_len, vocab_size: int) -> None:
    """The input of a `TransformerEncoder`: ids `(b, s)` and lengths
    `(b,)`."""
    check_ids(src, "src", 2, vocab_size)
    check_lengths(src_len, src)


class TransformerEncoder(nn.Module):
    """Encoder-only: real tokens attend to real tokens; context: the states' mean."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        check_config(config, TransformerConfig)
        c = self.config = config
        self.embed = Embedding(c.vocab_size, c.d_model, c.max_len, c.dropout)
        self.blocks = stack(c)
        self.norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()

    def forward(self, src: torch.Tensor, src_len: torch.Tensor) -> seq2seq.Encoded:
        check_source(src, src_len, self.embed.tok.num_embeddings)
        keys = padding_mask(src_len, src.shape[1]).to(src.device)  # (b, 1, s)
        x = self.embed(src)
        for block in self.blocks:
            x = block(x, keys)  # keys: real only
        x = self.norm(x)
        mask = keys[:, 0]  # (b, s)
        return seq2seq.Encoded(x, mask, rnn.pool(x, mask, "mean"))


class TransformerDecoder(nn.Module):
    """Causal self-attention over `[h; tgt_in]` + cross-attention to the encoder states.
    Shapes: tgt_in `(b, t)`, h `(b, t')` or None → `(b, t, v)`, `(b, t' + t)`, None."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        check_config(config, TransformerConfig)
        c = self.config = config
        self.embed = Embedding(c.vocab_size, c.d_model, c.max_len, c.dropout)
        self.blocks = stack(c, cross=True)
        self.norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.readout = nn.Linear(c.d_model, c.vocab_size)

    def forward(
        self, tgt_in: torch.Tensor, enc: seq2seq.Encoded, h: torch.Tensor | None = None
    ):
        prefix = tgt_in if h is None else torch.cat([h, tgt_in], 1)  # (b, t_all)
        x = self.embed(prefix)
        mask = causal_mask(prefix.shape[1], device=prefix.device)  # (1, t_all, t_all)
        memory_mask = enc.mask[:, None, :]  # (b, 1, s)
        for block in self.blocks:
            x = block(x, mask, memory=enc.states, memory_mask=memory_mask)
        x = self.norm(x[:, -tgt_in.shape[1] :])  # (b, t, d)
        return self.readout(x), prefix, None  # (b, t, v)


def make_seq2seq(config: TransformerConfig, *, src_vocab_size: int) -> seq2seq.Seq2Seq:
    """`config`'s decoder and an encoder of its sizes over `src_vocab_size` tokens."""
    check_config(config, TransformerConfig)
    encoder = TransformerEncoder(replace(config, vocab_size=src_vocab_size))
    return seq2seq.Seq2Seq(encoder, TransformerDecoder(config))
