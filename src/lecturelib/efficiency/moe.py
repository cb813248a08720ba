"""Chapter 16: mixture-of-experts feed-forward layers and a GPT built from them.

A mixture-of-experts (MoE) layer replaces the one feed-forward network of a Transformer
block by `n_experts` of them and a *router* that sends each token to `top_k` of them
(Shazeer et al., arXiv:1701.06538; GShard, arXiv:2006.16668; Switch Transformer,
arXiv:2101.03961). The chosen experts' outputs are mixed with gates: for `top_k = 1`
the chosen expert's router probability (Switch Transformer), for `top_k > 1` the
softmax of the router's logits over the chosen experts (Shazeer et al.'s gate, as
GShard, GLaM and Mixtral use it);
`MoEConfig.renormalise` overrides the choice.

- `top_k_gating`: the router's choice and weights;
- `expert_capacity` and `capacity_mask`: each expert takes at most `C`
  tokens per batch; the assignments beyond that are *dropped* (first choices are served
  first);
- `dispatch_loop`, the reference (a Python loop over tokens),
  `dispatch_sorted`, the batched dispatch (sort the assignments by expert, run
  each expert once on its rows, scatter-add the weighted outputs back), and
  `dispatch_slots`, the dispatch of fixed shapes (each expert runs on `C` slots, so
  no size depends on the data and a GPU never waits for the host, as GShard and
  Switch dispatch on TPUs); tests assert that they agree, outputs and gradients;
- `load_balancing_loss` (Switch's auxiliary loss) and `router_z_loss`
  (ST-MoE, arXiv:2202.08906);
- `MoE`, `MoEGPT` (chapter 11's GPT whose MLPs are MoE layers) and
  `moe_lm_loss` (next-token loss plus the auxiliary losses);
- `param_counts`: total and activated (used per token) parameters.

Each taught function calls one `check_*` function for its arguments, defined in the
section before it.

Simplifications: every expert is chapter 11's `gpt.MLP`; all experts live on one
device (no expert parallelism, so "dispatch" moves rows within one tensor instead of
between devices); a dropped assignment contributes nothing, and the token passes on
through the residual connection, as in Switch.

Shapes: `n` tokens (batch and positions flattened), `d` d_model, `E` n_experts,
`k` top_k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.pretraining import gpt
from lecturelib.recurrence import lm
from lecturelib.validate import (
    check_bool,
    check_int,
    check_number,
    check_tensor,
    check_on_device,
    check_type,
    describe,
)

DISPATCH = ("sorted", "loop", "slots")


@dataclass
class MoEConfig:
    d_model: int
    d_ff: int  # the hidden width of each expert
    n_experts: int = 8
    top_k: int = 2
    capacity_factor: float | None = None  # None: experts take every token sent to them
    balance_coef: float = 0.01  # weight of the balancing loss (Switch: 0.01)
    z_coef: float = 0.0  # weight of the router z-loss (ST-MoE: 0.001)
    dispatch: str = "sorted"  # "slots" needs a capacity_factor
    renormalise: bool | None = None  # gates sum to 1; None: when top_k > 1

    def __post_init__(self):
        check_moe_config(self)


# The argument checks ------------------------------------------------------------------


def check_moe_config(c: MoEConfig) -> None:
    """The fields of a `MoEConfig`."""
    for name in ("d_model", "d_ff", "n_experts"):
        check_int(getattr(c, name), f"MoEConfig.{name}", 1)
    check_top_k(c.top_k, c.n_experts)
    check_capacity_factor(c.capacity_factor)
    check_number(c.balance_coef, "MoEConfig.balance_coef", 0.0)
    check_number(c.z_coef, "MoEConfig.z_coef", 0.0)
    check_renormalise(c.renormalise, "MoEConfig.renormalise")
    if c.dispatch not in DISPATCH:
        raise ValueError(
            f"MoEConfig.dispatch must be one of {DISPATCH}; got {c.dispatch!r}"
        )
    if c.dispatch == "slots" and c.capacity_factor is None:
        raise ValueError(
            "MoEConfig.dispatch 'slots' needs a capacity_factor (each expert's slots); "
            "got capacity_factor None"
        )


def check_top_k(top_k, n_experts: int) -> None:
    """`top_k` must be an int in `1..n_experts`."""
    ok = isinstance(top_k, int) and not isinstance(top_k, bool)
    if not (ok and 1 <= top_k <= n_experts):
        raise ValueError(
            f"top_k must be an int in 1..n_experts = {n_experts}; got {describe(top_k)}"
        )


def check_capacity_factor(factor) -> None:
    """`factor` must be a finite number > 0, or `None` (no capacity limit)."""
    if factor is None:
        return
    ok = isinstance(factor, (int, float)) and not isinstance(factor, bool)
    if not (ok and math.isfinite(factor) and factor > 0):
        raise ValueError(
            f"capacity_factor must be a finite number > 0 or None; "
            f"got {describe(factor)}"
        )


def check_router_logits(logits) -> None:
    """`logits` must be a float `(n, E)` tensor of at least one token: the
    auxiliary losses average over the tokens, and a mean over none is NaN."""
    check_tensor(logits, "logits", "(n, E)", dims=2)
    if logits.shape[0] < 1 or logits.shape[1] < 1:
        raise ValueError(
            f"logits must be (n, E) with n >= 1 tokens and E >= 1 experts (a mean "
            f"over no token is NaN); got shape {tuple(logits.shape)}"
        )


def check_routing(logits: torch.Tensor, experts: torch.Tensor) -> None:
    """`logits` `(n, E)` float, `n >= 1`, and `experts` `(n, k)` long ids in
    `0..E-1`."""
    check_router_logits(logits)
    check_experts(experts, logits.shape[1])
    if experts.shape[0] != logits.shape[0]:
        raise ValueError(
            f"experts has {experts.shape[0]} rows but logits has "
            f"{logits.shape[0]}; both need one row per token"
        )


def check_experts(experts, n_experts: int) -> None:
    """`experts` must be an `(n, k)` long tensor of expert ids in `0..E-1`."""
    message = f"experts must be an (n, k) long tensor; got {describe(experts)}"
    if not (isinstance(experts, torch.Tensor) and experts.dtype == torch.long):
        raise TypeError(message)
    if experts.dim() != 2:
        raise ValueError(message)
    if experts.numel():  # on an accelerator, checked there without a read-back
        check_on_device(
            ((experts >= 0) & (experts < n_experts)).all(),
            f"experts must hold expert ids in 0..{n_experts - 1}",
            lambda: f"; got ids from {int(experts.min())} to {int(experts.max())}",
        )


def check_dispatch(x, weights, experts, keep, expert_fns) -> None:
    """The arguments of the dispatch functions: x `(n, d)`; weights, experts and keep
    `(n, k)`; one callable per expert."""
    check_tensor(x, "x", "(n, d)", dims=2)
    check_tensor(weights, "weights", "(n, k)", dims=2)
    if not (
        isinstance(expert_fns, (list, tuple, nn.ModuleList))
        and len(expert_fns)
        and all(callable(fn) for fn in expert_fns)
    ):
        raise TypeError(
            f"expert_fns must be a non-empty list of callables, one per "
            f"expert; got {describe(expert_fns)}"
        )
    check_experts(experts, len(expert_fns))
    if not (isinstance(keep, torch.Tensor) and keep.dtype == torch.bool):
        raise TypeError(f"keep must be an (n, k) bool tensor; got {describe(keep)}")
    n = x.shape[0]
    if not weights.shape == experts.shape == keep.shape or weights.shape[0] != n:
        raise ValueError(
            f"weights, experts and keep must all be (n, k) with n = {n} "
            f"rows of x; got {tuple(weights.shape)}, {tuple(experts.shape)} "
            f"and {tuple(keep.shape)}"
        )


def check_top_k_gating(logits, k, renormalise=None) -> None:
    """The arguments of `top_k_gating`: logits `(n, E)`, `k` in `1..E`,
    `renormalise` a bool or None."""
    check_tensor(logits, "logits", "(n, E)", dims=2)
    check_top_k(k, logits.shape[1])
    check_renormalise(renormalise, "renormalise")


def check_renormalise(renormalise, name: str) -> None:
    """`renormalise` must be True, False or None (None: only when `top_k > 1`)."""
    if renormalise is not None:
        check_bool(renormalise, name)


def check_expert_capacity(n_tokens, n_experts, top_k, factor) -> None:
    """The arguments of `expert_capacity` (a capacity factor is needed here)."""
    check_int(n_tokens, "n_tokens", 1)
    check_int(n_experts, "n_experts", 1)
    check_top_k(top_k, n_experts)
    check_capacity_factor(factor)
    if factor is None:
        raise ValueError("factor must be a finite number > 0; got None")


def check_capacity_mask(experts, n_experts, capacity) -> None:
    """The arguments of `capacity_mask`."""
    check_int(n_experts, "n_experts", 1)
    check_experts(experts, n_experts)
    check_int(capacity, "capacity", 0)


def check_dispatch_slots(x, weights, experts, expert_fns, capacity) -> None:
    """The arguments of `dispatch_slots`: those of the other dispatches (all kept),
    and a capacity of at least one slot per expert."""
    check_dispatch(
        x, weights, experts, torch.ones_like(weights, dtype=torch.bool), expert_fns
    )
    check_int(capacity, "capacity", 1)


def check_moe_input(x, d_model: int) -> None:
    """The input of `MoE.forward`: a float tensor `(b, t, d_model)` of at
    least one token (the auxiliary losses average over the tokens)."""
    check_tensor(x, "x", "(b, t, d_model)", dims=3)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"x must have d_model = {d_model} features; got shape {tuple(x.shape)}"
        )
    if x.shape[0] * x.shape[1] < 1:
        raise ValueError(
            f"x must hold at least one token (the auxiliary losses are means over "
            f"the tokens, NaN over none); got shape {tuple(x.shape)}"
        )


def check_moe_gpt(config, moe) -> None:
    """The arguments of `MoEGPT`: a `MoEConfig` of the GPT's width."""
    check_type(moe, "moe", MoEConfig, "a MoEConfig")
    if moe.d_model != config.d_model:
        raise ValueError(
            f"moe.d_model ({moe.d_model}) must equal the GPT's "
            f"d_model ({config.d_model})"
        )


def check_moe_lm_loss(model) -> None:
    """The model of `moe_lm_loss`: a `MoEGPT`, possibly wrapped by
    `DistributedDataParallel`."""
    inner = getattr(model, "module", model)
    if not isinstance(inner, MoEGPT):
        raise TypeError(f"model must be a MoEGPT; got {type(inner).__name__}")


# The algorithm ------------------------------------------------------------------------


def top_k_gating(
    logits: torch.Tensor, k: int, renormalise: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-`k` experts and gates: softmax over all E, or over the k if `renormalise`.
    Shapes: logits (n, E) -> weights, experts (n, k); `renormalise` None: k > 1."""
    check_top_k_gating(logits, k, renormalise)
    if renormalise is None:
        renormalise = k > 1  # Switch for k = 1, Shazeer et al.'s gate for k > 1
    top, experts = logits.topk(k, dim=-1)  # (n, k) each
    if renormalise:  # the softmax of the chosen logits: the gates sum to 1
        return F.softmax(top, dim=-1), experts
    return F.softmax(logits, dim=-1).gather(-1, experts), experts  # p_e over all E


def expert_capacity(n_tokens: int, n_experts: int, top_k: int, factor: float) -> int:
    """An expert's assignments per batch, `ceil(factor · n_tokens · top_k / E)`."""
    check_expert_capacity(n_tokens, n_experts, top_k, factor)
    return math.ceil(factor * n_tokens * top_k / n_experts)


def capacity_mask(experts: torch.Tensor, n_experts: int, capacity: int) -> torch.Tensor:
    """The assignments each expert keeps: its first `capacity`, first choices first."""
    check_capacity_mask(experts, n_experts, capacity)
    return queue_position(experts, n_experts) < capacity


def queue_position(experts: torch.Tensor, n_experts: int) -> torch.Tensor:
    """Each assignment's place in its expert's queue, first choices first: (n, k)."""
    check_experts(experts, n_experts)
    one_hot = F.one_hot(experts.T.reshape(-1), n_experts)  # (k·n, E), choice-major
    slot = (one_hot.cumsum(0) * one_hot).sum(-1) - 1  # (k·n,)
    return slot.view(experts.shape[1], -1).T


def dispatch_loop(
    x: torch.Tensor,
    weights: torch.Tensor,
    experts: torch.Tensor,
    keep: torch.Tensor,
    expert_fns,
) -> torch.Tensor:
    """The reference MoE output: one weighted expert call per token and kept choice."""
    check_dispatch(x, weights, experts, keep, expert_fns)
    rows = []
    for i in range(x.shape[0]):
        y_i = torch.zeros_like(x[i])
        for j in range(experts.shape[1]):
            if keep[i, j]:
                y_i = y_i + weights[i, j] * expert_fns[experts[i, j]](x[i][None])[0]
        rows.append(y_i)
    return torch.stack(rows)


def dispatch_sorted(
    x: torch.Tensor,
    weights: torch.Tensor,
    experts: torch.Tensor,
    keep: torch.Tensor,
    expert_fns,
) -> torch.Tensor:
    """The batched MoE output: each expert runs once on its kept tokens (sorted)."""
    check_dispatch(x, weights, experts, keep, expert_fns)
    token = torch.arange(x.shape[0], device=x.device)[:, None].expand_as(experts)
    token, expert, weight = token[keep], experts[keep], weights[keep]  # (m,) kept
    order = expert.argsort(stable=True)
    token, expert, weight = token[order], expert[order], weight[order]
    counts = torch.bincount(expert, minlength=len(expert_fns)).tolist()
    outputs = [fn(rows) for fn, rows in zip(expert_fns, x[token].split(counts))]
    y = torch.cat(outputs) * weight[:, None]  # (m, d)
    return torch.zeros_like(x).index_add(0, token, y)


def dispatch_slots(
    x: torch.Tensor,
    weights: torch.Tensor,
    experts: torch.Tensor,
    expert_fns,
    capacity: int,
) -> torch.Tensor:
    """The MoE output in fixed shapes: each expert runs on `capacity` slots, and the
    assignments beyond them are dropped, as `capacity_mask` drops them."""
    check_dispatch_slots(x, weights, experts, expert_fns, capacity)
    (n, k), d = experts.shape, x.shape[1]
    slot = queue_position(experts, len(expert_fns))  # (n, k)
    spare = len(expert_fns) * capacity  # one row past the slots for the dropped
    dest = torch.where(slot < capacity, experts * capacity + slot, spare).reshape(-1)
    slots = x.new_zeros(spare + 1, d).index_add(0, dest, x.repeat_interleave(k, 0))
    outputs = [fn(rows) for fn, rows in zip(expert_fns, slots[:spare].split(capacity))]
    y = F.pad(torch.cat(outputs), (0, 0, 0, 1))[dest].view(n, k, d)  # dropped: zeros
    return (y * weights[..., None]).sum(1)


def load_balancing_loss(logits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """Switch's `E · Σ_e f_e · P_e`, `f` over the n·k assignments: 1 at balance, any k.
    Shapes: logits (n, E), experts (n, k) -> scalar."""
    check_routing(logits, experts)
    n_experts = logits.shape[-1]
    f = F.one_hot(experts.reshape(-1), n_experts).float().mean(0)  # (E,) each
    P = F.softmax(logits, dim=-1).mean(0)  # (E,) each
    return n_experts * (f * P).sum()


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE's router z-loss: the mean over tokens of `(log Σ_e exp z_e)²`."""
    check_router_logits(logits)
    return torch.logsumexp(logits, dim=-1).square().mean()


@dataclass
class RouterStats:
    """What one MoE forward pass did: assignments per expert, dropped assignments and
    the auxiliary losses."""

    load: torch.Tensor  # (E,) assignments each expert received (before capacity)
    dropped: torch.Tensor  # () assignments beyond an expert's capacity
    assignments: int  # n · k
    balance_loss: torch.Tensor
    z_loss: torch.Tensor


class MoE(nn.Module):
    """A router and `n_experts` expert MLPs; `stats`, `aux_loss`: of the last pass."""

    def __init__(self, config: MoEConfig):
        super().__init__()
        check_type(config, "config", MoEConfig, "a MoEConfig")
        self.config = config
        expert = gpt.GPTConfig(
            vocab_size=1, d_model=config.d_model, d_ff=config.d_ff, n_heads=1
        )
        self.router = nn.Linear(config.d_model, config.n_experts, bias=False)
        self.experts = nn.ModuleList(gpt.MLP(expert) for _ in range(config.n_experts))
        self.stats: RouterStats | None = None
        self.aux_loss = torch.tensor(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        check_moe_input(x, c.d_model)
        flat = x.reshape(-1, c.d_model)  # (n, d)
        logits = self.router(flat)  # (n, E)
        weights, experts = top_k_gating(logits, c.top_k, c.renormalise)  # (n, k)
        keep = torch.ones_like(experts, dtype=torch.bool)
        if c.capacity_factor is not None:
            cap = expert_capacity(len(flat), c.n_experts, c.top_k, c.capacity_factor)
            keep = capacity_mask(experts, c.n_experts, cap)
        if c.dispatch == "slots":
            y = dispatch_slots(flat, weights, experts, self.experts, cap)
        else:
            dispatch = dispatch_sorted if c.dispatch == "sorted" else dispatch_loop
            y = dispatch(flat, weights, experts, keep, self.experts)
        self.record(logits, experts, keep)
        return y.view_as(x)

    def record(self, logits, experts, keep) -> None:
        c = self.config
        balance, z = load_balancing_loss(logits, experts), router_z_loss(logits)
        self.aux_loss = c.balance_coef * balance + c.z_coef * z
        load = F.one_hot(experts.reshape(-1), c.n_experts).sum(0)  # stays on the device
        self.stats = RouterStats(
            load, (~keep).sum(), experts.numel(), balance.detach(), z.detach()
        )


class MoEGPT(gpt.GPT):
    """The GPT with a `MoE` layer in place of every block's MLP."""

    def __init__(self, config: gpt.GPTConfig, moe: MoEConfig):
        super().__init__(config)
        check_moe_gpt(config, moe)
        self.moe_config = moe
        for block in self.blocks:
            block.mlp = MoE(moe)
            block.mlp.apply(self.init_weights)  # GPT-2's init; residual ones scaled:
            for mlp in block.mlp.experts:
                std = 0.02 / math.sqrt(2 * config.n_layers)
                nn.init.normal_(mlp.down.weight, std=std)

    def moe_layers(self) -> list[MoE]:
        return [block.mlp for block in self.blocks]

    def aux_loss(self) -> torch.Tensor:
        """The last forward pass's weighted auxiliary losses, summed over layers."""
        return sum(layer.aux_loss for layer in self.moe_layers())


def moe_lm_loss(
    model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]
) -> torch.Tensor:
    """Next-token cross-entropy plus the model's auxiliary losses."""
    check_moe_lm_loss(model)
    inner = getattr(model, "module", model)  # DistributedDataParallel wraps the model
    return lm.next_token_loss(model, batch) + inner.aux_loss()


def param_counts(model: nn.Module) -> tuple[int, int]:
    """Total and activated (per token) non-embedding parameters of a GPT or `MoEGPT`."""
    check_type(model, "model", gpt.GPT, "a gpt.GPT or MoEGPT")
    total = gpt.n_params(model)
    if not isinstance(model, MoEGPT):
        return total, total
    c = model.moe_config
    per_expert = sum(p.numel() for p in model.moe_layers()[0].experts[0].parameters())
    idle = len(model.blocks) * (c.n_experts - c.top_k) * per_expert
    return total, total - idle
