"""Chapter 14: what the cached path reads from the model it serves.

A KV cache continues the model's own computation, so it must rotate queries and keys
with the very tables the model holds: `Rope.of_model` reads them from the blocks
(chapter 18's `rope_scaling.extend` rescales them, YaRN's factor on queries and keys
included) and continues them past their end only where they are the config's plain
RoPE. `check_gpt` and `check_token_wise` refuse, by name, the variants of
chapter 11's `lecturelib.pretraining.gpt.GPT` that a cached (token by token)
forward cannot run exactly; `other_model` says how the model a cache was built for
differs from another.

Shapes: `t` positions, `e` d_head.
"""

from __future__ import annotations

from dataclasses import fields

import torch

from lecturelib.pretraining import gpt
from lecturelib.transformers import positions
from lecturelib.validate import check_int, check_on_device, check_tensor


def check_rope_call(x, start, max_len: int, d_head: int) -> None:
    """The arguments of a `Rope` call: float `x` `(..., t, d_head)` and
    positions `start..start+t-1` inside the table (a negative `start` would read
    the table from its end)."""
    check_tensor(x, "x", f"(..., t, d_head = {d_head})")
    if x.dim() < 2 or x.shape[-1] != d_head:
        raise ValueError(
            f"x must be (..., t, d_head) with d_head = {d_head}; got shape "
            f"{tuple(x.shape)}"
        )
    check_int(start, "start (the position of x's first row)", 0)
    t = x.shape[-2]
    if start + t > max_len:
        raise ValueError(
            f"positions {start}..{start + t - 1} exceed the RoPE "
            f"table's max_len = {max_len}"
        )


class Rope:
    """RoPE with cosines and sines precomputed for `max_len` positions; `rope(x,
    start)` rotates `x` as positions `start..start+t-1`; the tables follow `x` to
    its device. Shapes: `(..., t, e)` → same."""

    def __init__(self, d_head: int, max_len: int, base: float = 10000.0, device=None):
        angles = positions.rope_angles(max_len, d_head, base, device=device)  # (n, e/2)
        self.cos, self.sin, self.max_len = angles.cos(), angles.sin(), max_len

    @classmethod
    def of_model(cls, model: gpt.GPT, max_len: int) -> Rope:
        """The rotation `model` applies itself: its blocks' own tables (which
        `rope_scaling.extend` rescales, YaRN's factor on queries and keys included),
        continued past them by the same formula only where they are the config's
        plain RoPE; a changed table stops where it stops."""
        cos, sin = model.blocks[0].attn.cos, model.blocks[0].attn.sin  # (n, e/2)
        c, n = model.config, len(cos)
        rope = cls.__new__(cls)
        rope.cos, rope.sin, rope.max_len = cos, sin, n
        if max_len <= n:  # its own tables cover the cache: nothing to compare or extend
            return rope
        plain = cls(c.d_head, max(n, max_len), c.rope_base, cos.device)
        plain.cos, plain.sin = plain.cos.to(cos), plain.sin.to(sin)
        if torch.equal(plain.cos[:n], cos) and torch.equal(plain.sin[:n], sin):
            return plain
        return rope

    def __call__(self, x: torch.Tensor, start: int) -> torch.Tensor:
        check_rope_call(x, start, self.max_len, 2 * self.cos.shape[-1])
        t = x.shape[-2]
        if self.cos.device != x.device:  # moved once, not at every call
            self.cos, self.sin = self.cos.to(x.device), self.sin.to(x.device)
        cos, sin = self.cos[start : start + t], self.sin[start : start + t]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


def check_gpt(model, needs: str = "the cached path") -> None:
    """`model` must be a RoPE `gpt.GPT` whose forward `needs` (a phrase for the
    message) runs itself: gpt.GPT's own forward and blocks, each block's attention a
    `gpt.CausalSelfAttention` (any `qkv` projection: LoRA's too), one RoPE table."""
    if not isinstance(model, gpt.GPT):
        raise TypeError(f"model must be a gpt.GPT; got {type(model).__name__}")
    if model.config.positions != "rope":
        raise ValueError(
            f"{needs} needs a RoPE model; got positions={model.config.positions!r}"
        )
    if type(model).forward is not gpt.GPT.forward:
        raise TypeError(
            f"{needs} runs gpt.GPT's forward; {type(model).__name__} has its own"
        )
    first = model.blocks[0].attn
    for i, block in enumerate(model.blocks):
        attn = block.attn
        if type(block).forward is not gpt.Block.forward or not isinstance(
            attn, gpt.CausalSelfAttention
        ):
            raise TypeError(
                f"{needs} runs each block as a gpt.Block with a gpt.CausalSelfAttention"
                f"; block {i} is {type(block).__name__} with attention "
                f"{type(attn).__name__} (peft.add_adapters wraps the attention)"
            )
        one_table = f"{needs} needs one RoPE table; block {i}'s differs"
        if attn.cos.shape != first.cos.shape or attn.sin.shape != first.sin.shape:
            raise ValueError(one_table)
        same = (attn.cos == first.cos).all() & (attn.sin == first.sin).all()
        check_on_device(same, one_table)  # no read-back on an accelerator


def check_token_wise(model, needs: str) -> None:
    """Every MLP of `model` must treat each token alone, as `needs` (a phrase for the
    message) reads a few tokens at a time: a MoE with a capacity drops tokens by how
    many share the batch, so it would route them otherwise than the full forward."""
    for i, block in enumerate(model.blocks):
        capacity = getattr(getattr(block.mlp, "config", None), "capacity_factor", None)
        if capacity is not None:
            raise ValueError(
                f"{needs} reads a few tokens at a time, but block {i}'s MoE has "
                f"capacity_factor={capacity!r}: it drops tokens by how many share a "
                f"batch, so cached and full forwards route them differently; use a "
                f"MoEConfig with capacity_factor=None"
            )


def check_positions(model, n: int, needs: str) -> None:
    """`model`'s rotation must reach `n` positions (a changed RoPE table stops at
    its end: `Rope.of_model`)."""
    held = Rope.of_model(model, n).max_len
    if n > held:
        raise ValueError(
            f"{needs} reads {n} positions, past the model's RoPE tables ({held} "
            f"positions): they were changed (e.g. by rope_scaling.extend) and the "
            f"cache cannot continue them"
        )


def other_model(built, model) -> str:
    """How the model a cache was built for differs from `model`, in words."""
    gpt.check_gpt(model)
    if not isinstance(built, gpt.GPT):
        return type(built).__name__
    a, b = built.config, model.config
    differ = [
        f"{f.name}={getattr(a, f.name)!r}, not {getattr(b, f.name)!r}"
        for f in fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    ]
    return "; ".join(differ) or "another GPT of the same config"
