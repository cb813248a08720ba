"""Optimisers and learning-rate schedules of the book's training recipe.

`adamw` is AdamW (Loshchilov and Hutter, arXiv:1711.05101) over `decay_groups`, and
`warmup_cosine` is the linear warm-up + cosine decay schedule of GPT-3 (arXiv:2005.14165).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lecturelib.train.batches import model_device
from lecturelib.validate import check_int, check_number, check_type, describe, is_int


def check_warmup_cosine(steps, warmup, final) -> None:
    """The arguments of `warmup_cosine`."""
    check_int(steps, "steps", 1)
    if not is_int(warmup) or not 0 <= warmup < steps:
        raise ValueError(
            f"need 0 <= warmup < steps; got warmup={warmup!r}, steps={steps}"
        )
    check_number(final, "final (a fraction of the peak rate)", 0, 1)


def warmup_cosine(
    optimizer: torch.optim.Optimizer, steps: int, warmup: int = 0, final: float = 0.0
):
    """Linear warm-up over `warmup` steps, then cosine decay to `final × lr` at `steps`;
    pass the result as `fit(..., optimizer=optimizer, scheduler=...)`."""
    check_warmup_cosine(steps, warmup, final)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / (steps - warmup))
        return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def check_decay_groups(model, weight_decay) -> None:
    """The arguments of `decay_groups`."""
    check_type(model, "model", nn.Module, "a torch.nn.Module")
    check_number(weight_decay, "weight_decay", 0)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay on weight matrices; none on biases, norm gains or embeddings.
    Trainable parameters only; a weight shared by two modules counts once."""
    check_decay_groups(model, weight_decay)
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
    """AdamW over `decay_groups`; fused on CUDA (a few kernels for all tensors, and fp16's scaler reads
    nothing back)."""
    check_number(lr, "lr", 0, low_open=True)
    fused = model_device(model).type == "cuda"
    return torch.optim.AdamW(
        decay_groups(model, weight_decay), lr=lr, betas=betas, fused=fused
    )


class Combined(torch.optim.Optimizer):
    """Several optimizers stepped as one, e.g. Muon for the blocks' matrices and AdamW for the
    rest. Its `param_groups` are theirs (the same dicts), so one learning-rate scheduler sets
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

    # fp16's GradScaler hands such a step its overflow flag as a device tensor
    # (`found_inf`) instead of reading it back to decide whether to step
    _step_supports_amp_scaling = True

    def step(self, closure=None):
        found_inf = getattr(self, "found_inf", None)
        if found_inf is not None and getattr(self, "grad_scale", None) is not None:
            for g in self.param_groups:  # not unscaled before the step: unscale now
                for p in g["params"]:
                    if p.grad is not None:
                        p.grad.div_(self.grad_scale)
        for o in self.optimizers.values():
            if found_inf is None:
                o.step()
            elif getattr(o, "_step_supports_amp_scaling", False):  # fused: skips itself
                o.grad_scale, o.found_inf = None, found_inf
                o.step()
                del o.grad_scale, o.found_inf
            else:
                step_unless(o, found_inf)

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


def check_step_unless(optimizer, found_inf) -> None:
    """The arguments of `step_unless`: an optimizer and a one-element flag tensor."""
    check_type(optimizer, "optimizer", torch.optim.Optimizer, "a torch.optim.Optimizer")
    if not isinstance(found_inf, torch.Tensor) or found_inf.numel() != 1:
        raise TypeError(
            f"found_inf must be a one-element tensor (GradScaler's overflow flag); got "
            f"{describe(found_inf)}"
        )


def step_unless(optimizer: torch.optim.Optimizer, found_inf: torch.Tensor) -> None:
    """`optimizer.step()`, undone where `found_inf` (a device flag) is set: what
    GradScaler's skipped step does, without reading the flag back. Every tensor the step
    changes (parameters, state) is kept and put back with `torch.where`; state that the
    step creates goes back to zeros (a fresh optimizer's, for Muon and Adam). State on
    another device than the flag (a non-fused Adam's step counter on the CPU) is put back
    correctly but reads the flag back."""
    check_step_unless(optimizer, found_inf)
    params = [
        p for g in optimizer.param_groups for p in g["params"] if p.grad is not None
    ]
    before = {id(t): t.clone() for p in params for t in _state_tensors(optimizer, p)}
    before.update({id(p): p.detach().clone() for p in params})
    optimizer.step()
    with torch.no_grad():
        for p in params:
            for t in [p, *_state_tensors(optimizer, p)]:
                old = before.get(id(t))
                # (a read-back where t lives on another device than the flag)
                skip = found_inf.reshape(()).to(t.device, torch.bool)
                t.copy_(torch.where(skip, old if old is not None else 0, t))


def _state_tensors(
    optimizer: torch.optim.Optimizer, p: torch.Tensor
) -> list[torch.Tensor]:
    return [
        t for t in optimizer.state.get(p, {}).values() if isinstance(t, torch.Tensor)
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
    (`adjust_lr_fn="match_rms_adamw"`, Liu et al., arXiv:2502.16982), so one `lr` and one
    schedule serve both."""
    check_number(lr, "lr", 0, low_open=True)
    decay, rest = decay_groups(model, weight_decay)
    matrices = decay["params"]
    muon = torch.optim.Muon(
        matrices, lr=lr, weight_decay=weight_decay, adjust_lr_fn="match_rms_adamw"
    )
    adamw_ = torch.optim.AdamW(
        rest["params"],
        lr=lr,
        betas=betas,
        weight_decay=0.0,
        fused=model_device(model).type == "cuda",
    )
    return Combined(muon=muon, adamw=adamw_)
