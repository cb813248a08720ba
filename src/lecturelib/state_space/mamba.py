"""Chapter 20: the Mamba block and a small Mamba language model.

A Mamba block (Gu & Dao, 2023, arXiv:2312.00752) projects the input to two streams of
width `d_inner`; one goes through a short causal depthwise convolution, SiLU and the
*selective* SSM of `lecturelib.state_space.scan` (whose `Δ, B, C` are computed from the
input), the other gates the result through SiLU; a last projection returns to
`d_model`. `MambaLM` stacks blocks with pre-norm residual connections, like the
GPT of chapter 11.

Generation runs the same weights as a recurrence (`MambaLM.step`): the state of a
layer is the last `d_conv - 1` convolution inputs and the SSM state `(d_inner,
d_state)`, a constant size whatever the length of the context.

Simplifications: no hardware-aware fused kernel (the scan is plain PyTorch), no
residual-in-fp32 or fused add-norm, and `A` is initialised as in S4D-Real.

Shapes: ids `(b, t)`; x `(b, t, d_model)`; states `(b, d_inner, ·)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from torch import nn

from lecturelib.state_space import scan
from lecturelib.validate import (
    check_ids,
    check_int,
    check_number,
    check_tensor,
    check_type,
    describe,
)


def check_mamba_config(config) -> None:
    """The fields of a `MambaConfig` (of a subclass: the messages name it)."""
    kind = type(config).__name__
    for name in ("d_model", "n_layers", "vocab_size", "d_state", "expand", "d_conv"):
        check_int(getattr(config, name), f"{kind}.{name}", 1)
    if config.dt_rank is not None:
        check_int(config.dt_rank, f"{kind}.dt_rank", 1)
    check_number(config.dt_min, f"{kind}.dt_min", 0, low_open=True)
    if not (isinstance(config.dt_max, (int, float)) and config.dt_max > config.dt_min):
        raise ValueError(
            f"{kind}.dt_max must be > dt_min = {config.dt_min}; got {config.dt_max!r}"
        )
    if config.scan not in scan.METHODS:
        raise ValueError(
            f"{kind}.scan must be one of {scan.METHODS}; got {config.scan!r}"
        )


@dataclass
class MambaConfig:
    d_model: int = 64
    n_layers: int = 2
    vocab_size: int = 65
    d_state: int = 16
    expand: int = 2  # d_inner = expand · d_model
    d_conv: int = 4  # the causal convolution's kernel size
    dt_rank: int | None = None  # ceil(d_model / 16)
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    scan: str = "chunked"

    def __post_init__(self):
        check_mamba_config(self)
        if self.dt_rank is None:
            self.dt_rank = math.ceil(self.d_model / 16)

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model


def check_causal_conv(channels, kernel_size, padding) -> None:
    """The arguments of `CausalConv1d`: sizes, and no padding but the causal
    one."""
    check_int(channels, "channels", 1)
    check_int(kernel_size, "kernel_size", 1)
    if padding is not None and padding != kernel_size - 1:
        raise ValueError(
            f"a causal conv1d pads kernel_size - 1 = {kernel_size - 1} "
            f"steps on the left only; got padding={padding!r}"
        )


class CausalConv1d(nn.Module):
    """Depthwise conv over the past along time (`kernel_size - 1` zeros on the left)."""

    def __init__(self, channels: int, kernel_size: int, padding: int | None = None):
        super().__init__()
        check_causal_conv(channels, kernel_size, padding)
        self.kernel_size = kernel_size
        self.weight = nn.Parameter(
            torch.randn(channels, kernel_size) / kernel_size**0.5
        )
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(rearrange(x, "b t d -> b d t"), (self.kernel_size - 1, 0))
        y = F.conv1d(x, self.weight[:, None], self.bias, groups=self.weight.shape[0])
        return rearrange(y, "b d t -> b t d")

    def step(self, x_t: torch.Tensor, state: torch.Tensor):
        """One step: `x_t` (b, d), the last `kernel_size - 1` inputs → `y_t`, state."""
        window = torch.cat([state, x_t[:, :, None]], dim=2)  # (b, d, k)
        y_t = einsum(window, self.weight, "b d k, d k -> b d") + self.bias
        return y_t, window[:, :, 1:]


class MambaBlock(nn.Module):
    """in-proj → causal conv1d → SiLU → selective SSM, gated by SiLU(z) → out-proj."""

    def __init__(self, config: MambaConfig):
        super().__init__()
        check_type(config, "config", MambaConfig, "a MambaConfig")
        c = self.config = config
        self.in_proj = nn.Linear(c.d_model, 2 * c.d_inner, bias=False)
        self.conv = CausalConv1d(c.d_inner, c.d_conv)
        self.x_proj = nn.Linear(c.d_inner, c.dt_rank + 2 * c.d_state, bias=False)
        self.dt_proj = nn.Linear(c.dt_rank, c.d_inner)
        dt = torch.exp(
            torch.rand(c.d_inner) * math.log(c.dt_max / c.dt_min) + math.log(c.dt_min)
        )  # log-uniform
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        A = torch.arange(1, c.d_state + 1, dtype=torch.float32).repeat(c.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))  # A = -exp(A_log)
        self.D = nn.Parameter(torch.ones(c.d_inner))
        self.out_proj = nn.Linear(c.d_inner, c.d_model, bias=False)

    def selection(self, x: torch.Tensor):
        """Δ, B, C from the input `x (…, d_inner)`, and `A (d_inner, n)`."""
        c = self.config
        dt, B, C = self.x_proj(x).split([c.dt_rank, c.d_state, c.d_state], dim=-1)
        return F.softplus(self.dt_proj(dt)), -torch.exp(self.A_log), B, C

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_block_input(x, self.config.d_model)
        x, z = self.in_proj(x).chunk(2, dim=-1)  # (b, t, d_inner)
        x = F.silu(self.conv(x))
        delta, A, B, C = self.selection(x)
        y = scan.selective_scan(x, delta, A, B, C, self.D, z, method=self.config.scan)
        return self.out_proj(y)

    def init_state(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero conv and SSM states: (b, d_inner, d_conv - 1), (b, d_inner, d_state)."""
        c, w = self.config, self.A_log
        return (
            w.new_zeros(batch, c.d_inner, c.d_conv - 1),
            w.new_zeros(batch, c.d_inner, c.d_state),
        )

    def step(self, x_t: torch.Tensor, state):
        """One token: `x_t` (b, d_model) and the state → `y_t` (b, d_model), state."""
        check_block_step(x_t, state, self.config)
        conv_state, h = state
        x_t, z_t = self.in_proj(x_t).chunk(2, dim=-1)  # (b, d_inner)
        x_t, conv_state = self.conv.step(x_t, conv_state)
        x_t = F.silu(x_t)
        delta, A, B, C = self.selection(x_t)
        h = torch.exp(delta[..., None] * A) * h + (delta * x_t)[..., None] * B[:, None]
        y_t = einsum(h, C, "b d n, b n -> b d") + self.D * x_t
        return self.out_proj(y_t * F.silu(z_t)), (conv_state, h)


def check_block_input(x, d_model: int) -> None:
    """`x` must be a float tensor `(b, t, d_model)`."""
    message = (
        f"x must be a floating (b, t, d_model={d_model}) tensor; got {describe(x)}"
    )
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(message)
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(message)


def check_block_step(x_t, state, config: MambaConfig) -> None:
    """The arguments of `MambaBlock.step`: `x_t (b, d_model)` and a state of
    the same batch, as `MambaBlock.init_state` gives (a state from another batch
    size would broadcast or fail deep inside)."""
    message = f"x_t must be a floating (b, d_model={config.d_model}) tensor; got "
    if not isinstance(x_t, torch.Tensor) or not x_t.is_floating_point():
        raise TypeError(message + describe(x_t))
    if x_t.dim() != 2 or x_t.shape[1] != config.d_model:
        raise ValueError(message + describe(x_t))
    b, d = x_t.shape[0], config.d_inner
    shapes = ((b, d, config.d_conv - 1), (b, d, config.d_state))
    if (
        not isinstance(state, (tuple, list))
        or len(state) != 2
        or not all(isinstance(s, torch.Tensor) for s in state)
    ):
        raise TypeError(
            f"state must be a pair of tensors (conv, ssm) from init_state; got "
            f"{describe(state)}"
        )
    if tuple(tuple(s.shape) for s in state) != shapes:
        raise ValueError(
            f"state must be (conv, ssm) of shapes {shapes[0]} and {shapes[1]} for a "
            f"batch of {b} (from init_state({b})); got "
            f"{tuple(state[0].shape)} and {tuple(state[1].shape)}"
        )


class Residual(nn.Module):
    """`x + layer(RMSNorm(x))`: the pre-norm residual wrapper of chapter 8."""

    def __init__(self, d_model: int, layer: nn.Module):
        super().__init__()
        check_int(d_model, "d_model", 1)
        check_type(layer, "layer", nn.Module, "an nn.Module")
        self.norm, self.layer = nn.RMSNorm(d_model), layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_residual_input(x, "x", "(..., d_model)", self.norm.normalized_shape[0])
        return x + self.layer(self.norm(x))

    def step(self, x_t: torch.Tensor, state):
        check_residual_step(self.layer, x_t, self.norm.normalized_shape[0])
        y_t, state = self.layer.step(self.norm(x_t), state)
        return x_t + y_t, state


def check_residual_input(x, name: str, shape: str, d_model: int) -> None:
    """The input of a `Residual`: a float tensor `shape` whose last axis is
    `d_model` (the width of its RMSNorm)."""
    check_tensor(x, name, shape)
    if x.dim() < 1 or x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must be {shape} with d_model = {d_model}; got shape "
            f"{tuple(x.shape)}"
        )


def check_residual_step(layer, x_t, d_model: int) -> None:
    """The arguments of `Residual.step`: a wrapped layer with a `step` (a
    `MambaBlock`) and one token `x_t (b, d_model)`."""
    if not callable(getattr(layer, "step", None)):
        raise TypeError(
            f"Residual.step needs a layer with a step method (a MambaBlock); got "
            f"{type(layer).__name__}"
        )
    check_residual_input(x_t, "x_t", "(b, d_model)", d_model)
    if x_t.dim() != 2:
        raise ValueError(f"x_t must be (b, d_model); got shape {tuple(x_t.shape)}")


def check_step(ids_t, states, vocab_size: int, n_layers: int) -> None:
    """The arguments of `MambaLM.step`: `(b,)` token ids and one state per
    layer."""
    check_ids(ids_t, "ids_t", dims=1, vocab_size=vocab_size)
    check_type(states, "states", list, "a list of layer states (from init_state)")
    if len(states) != n_layers:
        raise ValueError(
            f"states must be a list of {n_layers} layer states "
            f"(from init_state); got {describe(states)}"
        )


class MambaLM(nn.Module):
    """Token embedding → `n_layers` residual Mamba blocks → RMSNorm → tied output
    head.

    Shapes: ids `(b, t)` → logits `(b, t, vocab_size)`.
    """

    def __init__(self, config: MambaConfig):
        super().__init__()
        check_type(config, "config", MambaConfig, "a MambaConfig")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(
            Residual(config.d_model, MambaBlock(config)) for _ in range(config.n_layers)
        )
        self.norm = nn.RMSNorm(config.d_model)
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, "ids", dims=2, vocab_size=self.config.vocab_size)
        x = self.embed(ids)  # (b, t, d_model)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x) @ self.embed.weight.T  # (b, t, vocab)

    def init_state(self, batch: int) -> list:
        check_int(batch, "batch", 1)
        return [layer.layer.init_state(batch) for layer in self.layers]

    def step(self, ids_t: torch.Tensor, states: list):
        """One token per sequence: `ids_t (b,)` and the states → logits `(b,
        vocab)`, new states."""
        check_step(ids_t, states, self.config.vocab_size, len(self.layers))
        x = self.embed(ids_t)
        new = []
        for layer, state in zip(self.layers, states):
            x, state = layer.step(x, state)
            new.append(state)
        return self.norm(x) @ self.embed.weight.T, new


def state_bytes(states: list) -> int:
    """The bytes held by a recurrent state (a nested list/tuple of tensors)."""
    if isinstance(states, torch.Tensor):
        return states.numel() * states.element_size()
    if isinstance(states, (list, tuple)):
        return sum(state_bytes(s) for s in states)
    raise TypeError(f"states must hold tensors; got {describe(states)}")


@torch.no_grad()
def generate(model: MambaLM, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
    """Greedy continuation of `prompt (b, t)` by `n_new` tokens, one recurrent step
    per token (the prompt is read step by step too). Shapes: → `(b, t + n_new)`."""
    check_type(model, "model", MambaLM, "a MambaLM")
    check_ids(prompt, "prompt", dims=2, vocab_size=model.config.vocab_size)
    check_int(n_new, "n_new", 0)
    states = model.init_state(prompt.shape[0])
    for i in range(prompt.shape[1]):
        logits, states = model.step(prompt[:, i], states)
    out = [prompt]
    for _ in range(n_new):
        nxt = logits.argmax(-1)
        out.append(nxt[:, None])
        logits, states = model.step(nxt, states)
    return torch.cat(out, dim=1)
