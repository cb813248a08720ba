"""Chapter 13: looking inside the chapter 11 GPT.

- The logit lens (nostalgebraist, 2020): apply the final norm and the output head to the
  residual stream after every block, as if the model stopped there, and read what it
  would predict.
- Attention maps: each block's attention weights `softmax(q kᵀ / √e + causal mask)`
  computed on a plain path (the model itself runs the fused
  `F.scaled_dot_product_attention`, which never forms the weights); `attention`
  also returns the block's attention output from these weights so that a test can
  compare it with the model's.

Shapes: `b` batch, `t` positions, `d` d_model, `h` heads, `e` d_head, `v`
vocabulary, `L` n_layers.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import einsum, rearrange

from lecturelib.pretraining import gpt
from lecturelib.pretraining.gpt import check_gpt
from lecturelib.validate import check_type, describe


@torch.no_grad()
def logit_lens(model: gpt.GPT, ids: torch.Tensor) -> torch.Tensor:
    """Stream logits (L + 1, b, t, v) before and after each block; last: model(ids)."""
    check_gpt(model)
    states = model.residual_stream(ids)  # L + 1 tensors (b, t, d)
    return torch.stack([model.head(model.norm(h)) for h in states])


@torch.no_grad()
def lens_loss_rank(
    model: gpt.GPT, ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per layer of the logit lens, the mean cross-entropy of the true next token and
    its mean rank (0: the top prediction). Shapes: ids `(b, t)` with `t >= 2` →
    `(L + 1,)` twice."""
    check_lens_loss_rank(model, ids)
    logits = logit_lens(model, ids)[:, :, :-1]  # (L+1, b, t-1, v)
    target = ids[:, 1:].expand(len(logits), -1, -1)  # (L+1, b, t-1)
    loss = F.cross_entropy(logits.flatten(0, 2), target.flatten(), reduction="none")
    true = logits.gather(-1, target[..., None])  # (L+1, b, t-1, 1)
    rank = (logits > true).sum(-1).float()
    return loss.view(target.shape).mean((1, 2)), rank.mean((1, 2))


def check_lens_loss_rank(model, ids) -> None:
    """A GPT and ids with a next token to predict (the model checks the rest)."""
    check_gpt(model)
    if isinstance(ids, torch.Tensor) and ids.dim() == 2 and ids.shape[1] < 2:
        raise ValueError(
            f"ids needs at least 2 positions (a next token); got shape "
            f"{tuple(ids.shape)}"
        )


def attention(attn: gpt.CausalSelfAttention, x: torch.Tensor):
    """One block's attention weights on its normalised input `x`, and its output."""
    check_attention(attn, x)
    q, k, v = rearrange(
        attn.qkv(x), "b t (three h e) -> three b h t e", three=3, h=attn.n_heads
    )
    if attn.rope:
        q, k = attn.rotate(q), attn.rotate(k)
    scores = einsum(q, k, "b h i e, b h j e -> b h i j") / math.sqrt(q.shape[-1])
    t = x.shape[1]
    future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(-1)
    y = einsum(weights, v, "b h i j, b h j e -> b h i e")
    return weights, attn.out(rearrange(y, "b h t e -> b t (h e)"))


def check_attention(attn, x) -> None:
    """The arguments of `attention`: a GPT attention and its input `(b, t, d)`."""
    check_type(attn, "attn", gpt.CausalSelfAttention, "a gpt.CausalSelfAttention")
    d = attn.out.in_features
    message = f"x must be a (b, t, {d}) tensor; got {describe(x)}"
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(message)
    if x.dim() != 3 or x.shape[-1] != d:
        raise ValueError(message)


@torch.no_grad()
def attention_maps(model: gpt.GPT, ids: torch.Tensor) -> torch.Tensor:
    """Every block's attention weights on `ids`.

    Shapes: `(b, t)` → `(L, b, h, t, t)`."""
    check_gpt(model)
    states = model.residual_stream(ids)
    return torch.stack(
        [
            attention(block.attn, block.norm1(h))[0]
            for block, h in zip(model.blocks, states)
        ]
    )
