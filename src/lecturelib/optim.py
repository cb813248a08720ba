"""Optimisers and learning-rate schedules of the book's training recipe.

:func:`adamw` is AdamW (Loshchilov and Hutter, arXiv:1711.05101) over :func:`decay_groups`, and
:func:`warmup_cosine` is the linear warm-up + cosine decay schedule of GPT-3 (arXiv:2005.14165).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lecturelib.batches import model_device


def _positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")


def warmup_cosine(optimizer: torch.optim.Optimizer, steps: int, warmup: int = 0,
                  final: float = 0.0):
    """Linear warm-up over ``warmup`` steps, then cosine decay to ``final × lr`` at ``steps``;
    pass the result as ``fit(..., optimizer=optimizer, scheduler=...)``."""
    _positive_int("steps", steps)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < steps:
        raise ValueError(f"need 0 <= warmup < steps; got warmup={warmup!r}, steps={steps}")
    if not 0.0 <= final <= 1.0:
        raise ValueError(f"final must be a fraction of the peak rate in [0, 1]; got {final!r}")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / (steps - warmup))
        return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: weight decay on the matrices of linear layers only; none on
    biases, normalisation gains or embeddings (decaying those only shrinks what the model
    needs). A weight shared by two modules (tied embeddings) is listed once."""
    if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a number >= 0; got {weight_decay!r}")
    no_decay = {id(p) for m in model.modules() if isinstance(m, nn.Embedding)
                for p in m.parameters(recurse=False)}
    decay, rest, seen = [], [], set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (rest if p.dim() < 2 or id(p) in no_decay else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": rest, "weight_decay": 0.0}]


def adamw(model: nn.Module, lr: float, weight_decay: float = 0.1,
          betas: tuple[float, float] = (0.9, 0.95)) -> torch.optim.AdamW:
    """AdamW over :func:`decay_groups` (fused into one kernel on CUDA)."""
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    fused = model_device(model).type == "cuda"
    return torch.optim.AdamW(decay_groups(model, weight_decay), lr=lr, betas=betas, fused=fused)
