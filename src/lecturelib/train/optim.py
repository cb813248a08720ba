"""Optimisers and learning-rate schedules of the book's training recipe.

:func:`adamw` is AdamW (Loshchilov and Hutter, arXiv:1711.05101) over :func:`decay_groups`, and
:func:`warmup_cosine` is the linear warm-up + cosine decay schedule of GPT-3 (arXiv:2005.14165).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lecturelib.train.batches import model_device


def positive_int(name: str, value, allow_none: bool = False) -> None:
    """Raise unless ``value`` is an int >= 1 (or None when ``allow_none``)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")


def warmup_cosine(
    optimizer: torch.optim.Optimizer, steps: int, warmup: int = 0, final: float = 0.0
):
    """Linear warm-up over ``warmup`` steps, then cosine decay to ``final × lr`` at ``steps``;
    pass the result as ``fit(..., optimizer=optimizer, scheduler=...)``."""
    positive_int("steps", steps)
    if (
        isinstance(warmup, bool)
        or not isinstance(warmup, int)
        or not 0 <= warmup < steps
    ):
        raise ValueError(
            f"need 0 <= warmup < steps; got warmup={warmup!r}, steps={steps}"
        )
    if not 0.0 <= final <= 1.0:
        raise ValueError(
            f"final must be a fraction of the peak rate in [0, 1]; got {final!r}"
        )

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / (steps - warmup))
        return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: weight decay on the matrices of linear layers only.

    None on biases, normalisation gains or embeddings (decaying those only shrinks what
    the model needs). A weight shared by two modules (tied embeddings) counts once."""
    if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a number >= 0; got {weight_decay!r}")
    no_decay = {
        id(p)
        for m in model.modules()
        if isinstance(m, nn.Embedding)
        for p in m.parameters(recurse=False)
    }
    decay, rest, seen = [], [], set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (rest if p.dim() < 2 or id(p) in no_decay else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]


def adamw(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
) -> torch.optim.AdamW:
    """AdamW over :func:`decay_groups` (fused into one kernel on CUDA)."""
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    fused = model_device(model).type == "cuda"
    return torch.optim.AdamW(
        decay_groups(model, weight_decay), lr=lr, betas=betas, fused=fused
    )


class Combined(torch.optim.Optimizer):
    """Several optimizers stepped as one, e.g. Muon for the blocks' matrices and AdamW for the
    rest. Its ``param_groups`` are theirs (the same dicts), so one learning-rate scheduler sets
    the rate of all of them."""

    def __init__(self, **optimizers: torch.optim.Optimizer):
        if not optimizers or not all(
            isinstance(o, torch.optim.Optimizer) for o in optimizers.values()
        ):
            raise TypeError(
                "Combined needs one or more named torch.optim.Optimizer objects; "
                f"got {[type(o).__name__ for o in optimizers.values()]}"
            )
        self.optimizers = optimizers
        self.defaults = {}
        self.state = {}
        self.param_groups = [g for o in optimizers.values() for g in o.param_groups]
        self._optimizer_step_pre_hooks, self._optimizer_step_post_hooks = {}, {}
        self._optimizer_state_dict_pre_hooks, self._optimizer_state_dict_post_hooks = (
            {},
            {},
        )
        self._optimizer_load_state_dict_pre_hooks = {}
        self._optimizer_load_state_dict_post_hooks = {}

    def step(self, closure=None):
        for o in self.optimizers.values():
            o.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers.values():
            o.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {name: o.state_dict() for name, o in self.optimizers.items()}

    def load_state_dict(self, state_dict: dict) -> None:
        if set(state_dict) != set(self.optimizers):
            raise ValueError(
                f"state_dict holds optimizers {sorted(state_dict)}; this one "
                f"has {sorted(self.optimizers)}"
            )
        for name, o in self.optimizers.items():
            o.load_state_dict(state_dict[name])
        self.param_groups = [
            g for o in self.optimizers.values() for g in o.param_groups
        ]


def muon_adamw(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
) -> Combined:
    """Muon (Jordan et al., 2024, kellerjordan.github.io/posts/muon) for the 2-D weights of
    linear layers, whose updates it orthogonalises with a few Newton–Schulz iterations; AdamW
    for embeddings, biases and norms. Muon's rate is scaled to match AdamW's update size
    (``adjust_lr_fn="match_rms_adamw"``, Liu et al., arXiv:2502.16982), so one ``lr`` and one
    schedule serve both."""
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    decay, rest = decay_groups(model, weight_decay)
    matrices = decay["params"]
    muon = torch.optim.Muon(
        matrices, lr=lr, weight_decay=weight_decay, adjust_lr_fn="match_rms_adamw"
    )
    adamw_ = torch.optim.AdamW(rest["params"], lr=lr, betas=betas, weight_decay=0.0)
    return Combined(muon=muon, adamw=adamw_)
