"""Chapter 8: the Transformer block (Vaswani et al., 2017, arXiv:1706.03762).

A :class:`Block` is multi-head self-attention (``attention.MultiHeadAttention``), optional
cross-attention to an encoder's output, and a position-wise :class:`FeedForward`
``d → d_ff → d`` (``d_ff = 4d`` by default), each sub-layer wrapped in a residual
connection and a LayerNorm:

- Post-LN (the original paper): ``x = LN(x + sublayer(x))``;
- Pre-LN (Xiong et al., 2020, arXiv:2002.04745; GPT-2 and most models since):
  ``x = x + sublayer(LN(x))``.

``residual=False`` drops the skip connections (for the chapter's gradient-norm
experiment); ``attn`` replaces the self-attention module by any module with the same
call signature (chapter 7's relative-position attention).

Shapes use ``b`` batch, ``t`` positions, ``s`` encoder positions, ``d`` width.
"""

from __future__ import annotations

import torch
from torch import nn

from lecturelib.attention import MultiHeadAttention


class FeedForward(nn.Module):
    """``FFN(x) = W_2 act(W_1 x + b_1) + b_2`` applied to every position on its own.

    Shapes: x ``(..., d)`` → ``(..., d)``.
    """

    def __init__(self, d_model: int, d_ff: int | None = None, dropout: float = 0.0,
                 activation: type[nn.Module] = nn.GELU):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), activation(), nn.Dropout(dropout),
                                 nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Block(nn.Module):
    """Self-attention (+ cross-attention when ``cross``) + feed-forward, each with
    "Add & Norm" in the Pre-LN (``norm_first=True``) or Post-LN order.

    Shapes: x ``(b, t, d)``, mask bool broadcastable to ``(b, h, t, t)`` (True = may
    attend), bias broadcastable to ``(b, h, t, t)``, memory ``(b, s, d)``, memory_mask
    broadcastable to ``(b, h, t, s)`` → ``(b, t, d)``.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int | None = None,
                 dropout: float = 0.0, norm_first: bool = True, residual: bool = True,
                 cross: bool = False, attn: nn.Module | None = None):
        super().__init__()
        self.norm_first, self.residual = norm_first, residual
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout) \
            if attn is None else attn
        self.norm1 = nn.LayerNorm(d_model)
        self.cross = MultiHeadAttention(d_model, n_heads, dropout=dropout) if cross else None
        self.norm_cross = nn.LayerNorm(d_model) if cross else None
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def sublayer(self, x: torch.Tensor, norm: nn.Module, f) -> torch.Tensor:
        """One "Add & Norm" around ``f``, in this block's order."""
        if self.norm_first:
            y = self.drop(f(norm(x)))
            return x + y if self.residual else y
        y = self.drop(f(x))
        return norm(x + y if self.residual else y)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                bias: torch.Tensor | None = None, memory: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        if (memory is None) != (self.cross is None):
            raise ValueError("a block built with cross=True needs memory (the encoder "
                             "output), and one without it takes none")
        x = self.sublayer(x, self.norm1, lambda h: self.attn(h, mask=mask, bias=bias)[0])
        if self.cross is not None:
            x = self.sublayer(x, self.norm_cross,
                              lambda h: self.cross(h, memory, memory_mask)[0])
        return self.sublayer(x, self.norm2, self.ffn)
