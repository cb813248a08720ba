"""Chapter 8: the Transformer (Vaswani et al., 2017, arXiv:1706.03762).

A :class:`Block` is multi-head self-attention (``self_attention.MultiHeadAttention``),
optional cross-attention to an encoder's output, and a position-wise
:class:`FeedForward` ``d → d_ff → d`` (``d_ff = 4d`` by default), each sub-layer wrapped
in a residual connection and a LayerNorm:

- Post-LN (the original paper): ``x = LN(x + sublayer(x))``;
- Pre-LN (Xiong et al., 2020, arXiv:2002.04745; GPT-2 and most models since):
  ``x = x + sublayer(LN(x))``.

``residual=False`` drops the skip connections (for the chapter's gradient-norm
experiment); ``attn`` replaces the self-attention module by any module with the same
call signature (chapter 7's relative-position attention); ``norm`` builds the
normalisation layers (``nn.LayerNorm`` by default, or :class:`RMSNorm`).

:class:`LayerNorm` is the formula of Ba et al. (2016, arXiv:1607.06450) written out;
:class:`RMSNorm` is Zhang & Sennrich (2019, arXiv:1910.07467).

Models are built from a ``@dataclass`` config passed by keyword (as in nanoGPT):
:class:`TransformerConfig` for the token models and :class:`ViTConfig` for the ViT, both
extending :class:`StackConfig`, the sizes of a stack of blocks (:func:`stack`).

The three architectures, from the same blocks:

- encoder-only (:class:`TransformerEncoder`: every position sees every other);
- decoder-only (:class:`TransformerLM`: a causal mask);
- encoder–decoder (:func:`make_seq2seq`: :class:`TransformerEncoder` +
  :class:`TransformerDecoder`, whose blocks cross-attend to the encoder's output). It
  plugs into ``seq2seq.Seq2Seq``, so ``seq2seq.greedy_decode`` and ``seq2seq.evaluate``
  (BLEU) serve it too: its decoder's "state" is the whole prefix, which it re-reads at
  every step (chapter 14 caches keys and values instead). Positions are learned, as in
  BERT and GPT; the paper used sinusoids (chapter 7 compares the schemes).

:class:`ViT` is the Vision Transformer (Dosovitskiy et al., 2021, arXiv:2010.11929):
non-overlapping ``P×P`` patches embedded by a convolution with kernel = stride = P
(:class:`PatchEmbedding`), a class token, learned positions and encoder blocks; the
paper's pre-training on large image sets and its MLP head's hidden layer are left out.

Masks follow the package's convention (``self_attention``): bool, True = may attend,
``(b, t, s)`` with ``b`` and ``t`` possibly 1: a causal mask is ``(1, t, t)``, a padding
mask ``(b, 1, s)``.

Shapes use ``b`` batch, ``t`` positions, ``s`` encoder positions, ``d`` width, ``v``
vocabulary, ``c`` channels, ``n`` patches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from einops import rearrange, repeat
from torch import nn

from lecturelib.recurrence import rnn, seq2seq
from lecturelib.recurrence.seq2seq import check_ids, check_lengths, check_sizes
from lecturelib.transformers.self_attention import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
)


def check_width(x, d_model: int, axes: str = "(..., d_model)") -> None:
    """Raise a ValueError unless ``x`` is a tensor whose last axis has ``d_model``
    features."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be {axes} with d_model={d_model}; got {got}")


class LayerNorm(nn.Module):
    """``LN(x) = γ ⊙ (x − μ) / √(σ² + ε) + β`` with the mean ``μ`` and the (biased)
    variance ``σ²`` of each position's ``d`` features.

    Shapes: x ``(..., d)`` → ``(..., d)``.
    """

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
    """``RMSNorm(x) = γ ⊙ x / √(mean(x²) + ε)``: LayerNorm without centring and without
    ``β``.

    Shapes: x ``(..., d)`` → ``(..., d)``.
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_width(x, len(self.weight))
        return self.weight * x * torch.rsqrt((x**2).mean(-1, keepdim=True) + self.eps)


class FeedForward(nn.Module):
    """``FFN(x) = W_2 act(W_1 x + b_1) + b_2`` applied to every position on its own.

    Shapes: x ``(..., d)`` → ``(..., d)``.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        activation: type[nn.Module] = nn.GELU,
    ):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff),
            activation(),
            nn.Dropout(dropout),
            nn.Linear(d_ff, d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_width(x, self.net[0].in_features)
        return self.net(x)


class Block(nn.Module):
    """Self-attention (+ cross-attention when ``cross``) + feed-forward, each with
    "Add & Norm" in the Pre-LN (``norm_first=True``) or Post-LN order.

    Shapes: x ``(b, t, d)``, mask bool ``(b, t, t)`` with ``b``, ``t`` possibly 1
    (True = may attend), bias broadcastable to ``(b, h, t, t)``, memory ``(b, s, d)``,
    memory_mask bool ``(b, t, s)`` with ``b``, ``t`` possibly 1 → ``(b, t, d)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        norm_first: bool = True,
        residual: bool = True,
        cross: bool = False,
        attn: nn.Module | None = None,
        norm: Callable[[int], nn.Module] = nn.LayerNorm,
    ):
        super().__init__()
        self.d_model, self.norm_first, self.residual = d_model, norm_first, residual
        self.attn = (
            MultiHeadAttention(d_model, n_heads, dropout=dropout)
            if attn is None
            else attn
        )
        self.norm1 = norm(d_model)
        self.cross = (
            MultiHeadAttention(d_model, n_heads, dropout=dropout) if cross else None
        )
        self.norm_cross = norm(d_model) if cross else None
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm2 = norm(d_model)
        self.drop = nn.Dropout(dropout)

    def sublayer(self, x: torch.Tensor, norm: nn.Module, f) -> torch.Tensor:
        """One "Add & Norm" around ``f``, in this block's order."""
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
        if (memory is None) != (self.cross is None):
            raise ValueError(
                "memory: a block built with cross=True needs memory (the "
                "encoder output), and one without it takes none; got "
                f"{'none' if memory is None else 'memory'}"
            )
        if x.dim() != 3:
            raise ValueError(f"x must be (b, t, d_model); got {tuple(x.shape)}")
        check_width(x, self.d_model, "(b, t, d_model)")
        x = self.sublayer(
            x, self.norm1, lambda h: self.attn(h, mask=mask, bias=bias)[0]
        )
        if self.cross is not None:
            x = self.sublayer(
                x, self.norm_cross, lambda h: self.cross(h, memory, memory_mask)[0]
            )
        return self.sublayer(x, self.norm2, self.ffn)


def layer_grad_norms(blocks: nn.ModuleList) -> torch.Tensor:
    """The L2 norm of the gradient of each block's parameters (after ``backward``).

    Shapes: ``l`` blocks → ``(l,)``.
    """
    if not isinstance(blocks, nn.ModuleList) or len(blocks) == 0:
        raise TypeError(
            f"blocks must be a non-empty nn.ModuleList; got {type(blocks).__name__}"
        )
    norms = []
    for block in blocks:
        grads = [p.grad.flatten() for p in block.parameters() if p.grad is not None]
        if not grads:
            raise ValueError(
                "blocks: a block has no gradients; call loss.backward() first"
            )
        norms.append(torch.cat(grads).norm())
    return torch.stack(norms)


class Embedding(nn.Module):
    """Token embedding plus a learned embedding of each position ``0 .. max_len-1``.

    Shapes: ids ``(b, t)`` with ``t <= max_len`` → ``(b, t, d)``.
    """

    def __init__(
        self, vocab_size: int, d_model: int, max_len: int, dropout: float = 0.0
    ):
        super().__init__()
        self.max_len = max_len
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, self.tok.num_embeddings, "ids")
        if ids.shape[1] > self.max_len:
            raise ValueError(
                f"ids must be (b, t) with t <= max_len={self.max_len}; "
                f"got {tuple(ids.shape)}"
            )
        positions = torch.arange(ids.shape[1], device=ids.device)  # (t,)
        return self.drop(self.tok(ids) + self.pos(positions))  # (b, t, d)


@dataclass(kw_only=True)
class StackConfig:
    """The sizes of a stack of blocks; ``d_ff=None`` means ``4 * d_model``."""

    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 3
    d_ff: int | None = None
    dropout: float = 0.0
    norm_first: bool = True
    residual: bool = True

    def __post_init__(self):
        d_ff = {} if self.d_ff is None else {"d_ff": self.d_ff}
        check_sizes(
            type(self).__name__,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            **d_ff,
        )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"{type(self).__name__}: d_model must be divisible by "
                f"n_heads; got d_model={self.d_model}, "
                f"n_heads={self.n_heads}"
            )
        if not 0 <= self.dropout < 1:
            raise ValueError(
                f"{type(self).__name__}: dropout must be in [0, 1); got "
                f"{self.dropout!r}"
            )


@dataclass(kw_only=True)
class TransformerConfig(StackConfig):
    """A token model: the stack's sizes, the vocabulary and the number of positions."""

    vocab_size: int
    max_len: int = 64

    def __post_init__(self):
        super().__post_init__()
        check_sizes(
            "TransformerConfig", vocab_size=self.vocab_size, max_len=self.max_len
        )


def check_config(config, kind: type) -> None:
    """Raise a TypeError unless ``config`` is a ``kind`` (a config dataclass)."""
    if not isinstance(config, kind):
        raise TypeError(
            f"config must be a {kind.__name__}; got {type(config).__name__}"
        )


def stack(config: StackConfig, *, cross: bool = False) -> nn.ModuleList:
    """``config.n_layers`` blocks; a Pre-LN stack also needs a final norm (its output is
    an un-normalised residual stream), which the models below add."""
    check_config(config, StackConfig)
    c = config
    return nn.ModuleList(
        Block(
            c.d_model,
            c.n_heads,
            d_ff=c.d_ff,
            dropout=c.dropout,
            norm_first=c.norm_first,
            residual=c.residual,
            cross=cross,
        )
        for _ in range(c.n_layers)
    )


class TransformerLM(nn.Module):
    """Decoder-only: embeddings → causal blocks → (final norm) → logits.

    Shapes: ids ``(b, t)`` → logits ``(b, t, v)``.
    """

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


class TransformerEncoder(nn.Module):
    """Encoder-only: every real token attends to every real token (a padding mask, no
    causal mask). Returns ``seq2seq.Encoded`` (context: the mean of the states).

    Shapes: src ``(b, s)``, src_len ``(b,)`` → states ``(b, s, d)``, mask ``(b, s)``.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        check_config(config, TransformerConfig)
        c = self.config = config
        self.embed = Embedding(c.vocab_size, c.d_model, c.max_len, c.dropout)
        self.blocks = stack(c)
        self.norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()

    def forward(self, src: torch.Tensor, src_len: torch.Tensor) -> seq2seq.Encoded:
        check_ids(src, self.embed.tok.num_embeddings, "src", "(b, s)")
        check_lengths(src_len, src)
        keys = padding_mask(src_len, src.shape[1])  # (b, 1, s)
        x = self.embed(src)
        for block in self.blocks:
            x = block(x, keys)  # keys: real only
        x = self.norm(x)
        mask = keys[:, 0]  # (b, s)
        return seq2seq.Encoded(x, mask, rnn.pool(x, mask, "mean"))


class TransformerDecoder(nn.Module):
    """Causal self-attention over the target prefix + cross-attention to the encoder
    states (queries from the decoder, keys and values from the encoder).

    ``h`` is the prefix read so far: the decoder re-reads ``[h; tgt_in]`` and returns
    the logits of the positions of ``tgt_in`` only, so a step-by-step call gives the
    same logits as one teacher-forced call (the interface of ``seq2seq.Decoder``).

    Shapes: tgt_in ``(b, t)``, enc (``seq2seq.Encoded``), h ``(b, t')`` or None
    → logits ``(b, t, v)``, h ``(b, t' + t)``, weights None.
    """

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
    """An encoder–decoder Transformer: a decoder as ``config`` says (``vocab_size``: the
    target vocabulary) and an encoder of the same sizes over ``src_vocab_size``
    tokens."""
    check_config(config, TransformerConfig)
    encoder = TransformerEncoder(replace(config, vocab_size=src_vocab_size))
    return seq2seq.Seq2Seq(encoder, TransformerDecoder(config))


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping ``P×P`` patches, each flattened, row by row.

    Shapes: images ``(b, c, H, W)`` → ``(b, n, c·P·P)`` with ``n = (H/P)·(W/P)``.
    """
    check_sizes("patchify", patch_size=patch_size)
    if (
        not isinstance(images, torch.Tensor)
        or images.dim() != 4
        or images.shape[2] % patch_size
        or images.shape[3] % patch_size
    ):
        got = (
            tuple(images.shape)
            if isinstance(images, torch.Tensor)
            else type(images).__name__
        )
        raise ValueError(
            f"images must be (b, c, H, W) with H and W multiples of "
            f"patch_size={patch_size}; got {got}"
        )
    return rearrange(
        images, "b c (gh p) (gw q) -> b (gh gw) (c p q)", p=patch_size, q=patch_size
    )


class PatchEmbedding(nn.Module):
    """Patches → linear embedding (a convolution with kernel = stride = P), a learned
    class token in front, plus learned position embeddings.

    Shapes: images ``(b, c, H, W)`` with ``H = W = image_size`` → ``(b, 1 + n, d)`` with
    ``n = H·W/P²``.
    """

    def __init__(
        self, image_size: int, patch_size: int, in_channels: int, d_model: int
    ):
        super().__init__()
        check_sizes(
            "PatchEmbedding",
            image_size=image_size,
            patch_size=patch_size,
            in_channels=in_channels,
            d_model=d_model,
        )
        if image_size % patch_size:
            raise ValueError(
                f"image_size must be a multiple of patch_size; got "
                f"{image_size} and {patch_size}"
            )
        self.image_size, self.in_channels = image_size, in_channels
        self.n_patches = (image_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_channels, d_model, patch_size, stride=patch_size)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 1 + self.n_patches, d_model))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        size = (self.in_channels, self.image_size, self.image_size)
        if (
            not isinstance(images, torch.Tensor)
            or images.dim() != 4
            or tuple(images.shape[1:]) != size
        ):
            got = (
                tuple(images.shape)
                if isinstance(images, torch.Tensor)
                else type(images).__name__
            )
            c, h, w = size
            raise ValueError(
                f"images must be (b, c, H, W) = (b, {c}, {h}, {w}) as "
                f"configured; got {got}"
            )
        x = rearrange(self.proj(images), "b d gh gw -> b (gh gw) d")  # (b, n, d)
        cls = repeat(self.cls, "1 1 d -> b 1 d", b=images.shape[0])  # (b, 1, d)
        return torch.cat([cls, x], 1) + self.pos  # (b, 1 + n, d)


@dataclass(kw_only=True)
class ViTConfig(StackConfig):
    """A ViT: the stack's sizes, square images of ``image_size`` pixels cut into
    ``patch_size`` patches, and the classes."""

    image_size: int
    patch_size: int
    n_classes: int
    in_channels: int = 1

    def __post_init__(self):
        super().__post_init__()
        check_sizes(
            "ViTConfig",
            image_size=self.image_size,
            patch_size=self.patch_size,
            n_classes=self.n_classes,
            in_channels=self.in_channels,
        )


class ViT(nn.Module):
    """Vision Transformer: patch embedding → encoder blocks → final norm → a linear
    classifier on the class token.

    Shapes: images ``(b, c, H, W)`` → logits ``(b, n_classes)``.
    """

    def __init__(self, config: ViTConfig):
        super().__init__()
        check_config(config, ViTConfig)
        c = self.config = config
        self.patches = PatchEmbedding(
            c.image_size, c.patch_size, c.in_channels, c.d_model
        )
        self.blocks = stack(c)
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.n_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patches(images)  # (b, 1 + n, d)
        for block in self.blocks:
            x = block(x)  # no mask
        return self.head(self.norm(x[:, 0]))  # (b, n_classes)
