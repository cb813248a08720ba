"""Chapter 19: S4D, a layer of diagonal state-space models, and a small network of them.

`S4D` (Gu, Gupta et al., arXiv:2206.11893) is one SSM of
`lecturelib.state_space.ssm` per channel with a diagonal complex `A` initialised
as S4D-Lin (`A_n = -1/2 + iπn`) or S4D-Inv (`A_n = -1/2 + i(N/π)(N/(2n+1) - 1)`)
(`s4d_init`), a learned step `Δ` per channel and a skip `D`; it uses zero-order
hold where the S4D paper also offers the bilinear rule. It runs as a convolution (FFT)
or as a recurrence, with the same outputs. `S4DNet` stacks S4D layers into a
small sequence model. The sizes live in an `S4DConfig` (layer and block) or an
`S4DNetConfig` (network), validated once when made.

Shapes: `b` batch, `t` time, `d_model` channels, `d_state // 2` complex modes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.state_space.ssm import (
    discretize_zoh,
    ssm_convolve,
    ssm_kernel,
    ssm_recurrent,
)
from lecturelib.transformers.self_attention import check_dropout
from lecturelib.validate import (
    check_ids,
    check_int,
    check_number,
    check_type,
    describe,
    is_int_tensor,
)

INITS = ("lin", "inv")


def check_s4d_init(d_state, init) -> None:
    """The arguments of `s4d_init`: an even `d_state >= 2` and one of
    `INITS`."""
    check_int(d_state, "d_state", 2)
    if d_state % 2:
        raise ValueError(
            f"d_state must be even (d_state/2 complex conjugate pairs); got {d_state}"
        )
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}; got {init!r}")


def s4d_init(d_state: int, init: str = "inv") -> torch.Tensor:
    """Diagonal `A`, Lin or Inv: `d_state // 2` complex128 modes, conjugates implied."""
    check_s4d_init(d_state, init)
    N = d_state
    n = torch.arange(N // 2, dtype=torch.float64)
    imag = math.pi * n if init == "lin" else N / math.pi * (N / (2 * n + 1) - 1)
    return torch.complex(torch.full_like(n, -0.5), imag)


def check_s4d_config(c) -> None:
    """The fields of an `S4DConfig` (of an `S4DNetConfig` too)."""
    check_int(c.d_model, "d_model", 1)
    check_s4d_init(c.d_state, c.init)
    check_number(c.dt_min, "dt_min", 0.0, low_open=True)
    check_number(c.dt_max, "dt_max", c.dt_min)
    check_dropout(c.dropout)


@dataclass(kw_only=True)
class S4DConfig:
    """The sizes of an `S4D` layer and an `S4DBlock`."""

    d_model: int = 64
    d_state: int = 64  # N: N // 2 complex modes, conjugates implied
    init: str = "inv"  # one of INITS (`s4d_init`)
    dt_min: float = 1e-3  # Δ starts log-uniform in [dt_min, dt_max]
    dt_max: float = 1e-1
    dropout: float = 0.0  # after each block

    def __post_init__(self):
        check_s4d_config(self)


def check_s4d_input(u, d_model: int, name: str = "S4D input", dims: int = 3) -> None:
    """`u` must be a float tensor `(b, t, d_model)` (`dims=3`) or one step
    `(b, d_model)` (`dims=2`)."""
    shape = f"(b, t, d_model={d_model})" if dims == 3 else f"(b, d_model={d_model})"
    if not isinstance(u, torch.Tensor) or not u.is_floating_point():
        raise TypeError(f"{name} must be a float tensor {shape}; got {describe(u)}")
    if u.dim() != dims:
        raise ValueError(f"{name} must be a float tensor {shape}; got {describe(u)}")
    if u.shape[-1] != d_model:
        raise ValueError(f"{name} must be {shape}; got shape {tuple(u.shape)}")
    if dims == 3:
        check_steps(u, name)


def check_steps(x, name: str) -> None:
    """A sequence `(b, t, ...)` must hold `t >= 1` steps."""
    if x.shape[1] < 1:
        raise ValueError(f"{name} must hold t >= 1 steps; got shape {tuple(x.shape)}")


def check_s4d_step(layer, u_t, h) -> None:
    """The arguments of `S4D.step`: one step `(b, d_model)` and, if given, a
    complex state `(b, d_model, d_state // 2)` of the same batch."""
    d_model = layer.config.d_model
    check_s4d_input(u_t, d_model, "u_t", dims=2)
    if h is None:
        return
    shape = (u_t.shape[0], d_model, layer.A_imag.shape[-1])
    if not isinstance(h, torch.Tensor) or not h.is_complex():
        raise TypeError(f"h must be a complex state {shape}; got {describe(h)}")
    if tuple(h.shape) != shape:
        raise ValueError(
            f"h must be a complex state {shape}; got shape {tuple(h.shape)}"
        )


class S4D(nn.Module):
    """Causal diagonal SSM per channel: `forward` by FFT, `recurrent`, `step` as RNN."""

    def __init__(self, config: S4DConfig):
        super().__init__()
        check_type(config, "config", S4DConfig, "an S4DConfig")
        c = self.config = config
        d, A = c.d_model, s4d_init(c.d_state, c.init)  # A: (N/2,)
        u = torch.rand(d, dtype=torch.float64)
        log_dt = math.log(c.dt_min) + u * (math.log(c.dt_max) - math.log(c.dt_min))
        self.log_dt = nn.Parameter(log_dt.float())  # (d_model,)
        self.log_A_real = nn.Parameter(A.real.neg().log().float().repeat(d, 1))
        self.A_imag = nn.Parameter(A.imag.float().repeat(d, 1))
        C = torch.randn(d, c.d_state // 2, dtype=torch.cfloat) * 0.5**0.5
        self.C = nn.Parameter(torch.view_as_real(C))  # (d_model, N/2, 2)
        self.D = nn.Parameter(torch.randn(d))

    def discrete(self):
        """`(Ā, B̄, 2C)`, each `(d_model, d_state // 2)` complex (ZOH, B = 1)."""
        A = torch.complex(-self.log_A_real.exp(), self.A_imag)
        dt = self.log_dt.exp().unsqueeze(-1)  # (d_model, 1)
        Abar, Bbar = discretize_zoh(A, torch.ones_like(A), dt)
        return Abar, Bbar, 2 * torch.view_as_complex(self.C)

    def kernel(self, L: int) -> torch.Tensor:
        return ssm_kernel(*self.discrete(), L)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """Convolutional mode: `y = K̄ * u + D u` per channel, by FFT."""
        check_s4d_input(u, self.config.d_model)
        x = u.transpose(1, 2)  # (b, d_model, t)
        y = ssm_convolve(x, self.kernel(x.shape[-1]), self.D)
        return y.transpose(1, 2)  # (b, t, d_model)

    def recurrent(self, u: torch.Tensor) -> torch.Tensor:
        """Recurrent mode: the outputs of `forward`, one step at a time."""
        check_s4d_input(u, self.config.d_model)
        y = ssm_recurrent(*self.discrete(), u.transpose(1, 2), self.D)
        return y.transpose(1, 2)

    def step(self, u_t: torch.Tensor, h: torch.Tensor | None = None):
        """One step of `u_t` (b, d_model); complex `h` (b, d_model, d_state // 2)."""
        check_s4d_step(self, u_t, h)
        Abar, Bbar, C2 = self.discrete()
        if h is None:
            h = u_t.new_zeros(u_t.shape[0], *Abar.shape, dtype=Abar.dtype)
        h = Abar * h + Bbar * u_t.unsqueeze(-1)
        return (C2 * h).sum(-1).real + self.D * u_t, h


class S4DBlock(nn.Module):
    """Pre-norm residual block: `x + Linear(GELU(S4D(LayerNorm(x))))`.

    Shapes: `(b, t, d_model)` → `(b, t, d_model)`.
    """

    def __init__(self, config: S4DConfig):
        super().__init__()
        check_type(config, "config", S4DConfig, "an S4DConfig")
        c = self.config = config
        self.norm = nn.LayerNorm(c.d_model)
        self.ssm = S4D(c)
        self.out = nn.Linear(c.d_model, c.d_model)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_s4d_input(x, self.config.d_model, "S4DBlock input")
        return x + self.drop(self.out(F.gelu(self.ssm(self.norm(x)))))


def check_s4d_net_config(c) -> None:
    """The fields of an `S4DNetConfig`: sizes and exactly one of vocab_size, d_in."""
    check_int(c.d_out, "d_out", 1)
    check_int(c.n_layers, "n_layers", 1)
    check_s4d_config(c)
    vocab_size, d_in = c.vocab_size, c.d_in
    if (vocab_size is None) == (d_in is None):
        raise ValueError(
            f"give exactly one of vocab_size (token input) and d_in "
            f"(feature input); got vocab_size={vocab_size!r}, "
            f"d_in={d_in!r}"
        )
    check_int(
        vocab_size if d_in is None else d_in,
        "vocab_size" if d_in is None else "d_in",
        1,
    )


@dataclass(kw_only=True)
class S4DNetConfig(S4DConfig):
    """An `S4DNet`'s sizes; give exactly one of `vocab_size` and `d_in`."""

    d_out: int  # the head's outputs per position
    n_layers: int = 2
    vocab_size: int | None = None  # token ids (b, t), embedded
    d_in: int | None = None  # features (b, t, d_in), projected

    def __post_init__(self):
        check_s4d_net_config(self)


def check_s4d_net_input(x, vocab_size, d_in) -> None:
    """Token ids `(b, t)` (with `vocab_size`) or features `(b, t, d_in)`."""
    if vocab_size is not None:
        message = f"S4DNet with vocab_size takes (b, t) token ids; got {describe(x)}"
        if not is_int_tensor(x):
            raise TypeError(message)
        if x.dim() != 2:
            raise ValueError(message)
        check_ids(x, "S4DNet's input", vocab_size=vocab_size, min_len=0)
        check_steps(x, "S4DNet's input")
        return
    message = (
        f"S4DNet with d_in={d_in} takes (b, t, {d_in}) features; got {describe(x)}"
    )
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(message)
    if x.dim() != 3 or x.shape[-1] != d_in:
        raise ValueError(message)
    check_steps(x, "S4DNet's input")


class S4DNet(nn.Module):
    """`S4DBlock` layers between an input map and an output head, causal.

    With `vocab_size` the input is token ids `(b, t)` (embedded); with `d_in` it
    is features `(b, t, d_in)` (projected).

    Shapes: → `(b, t, d_out)`.
    """

    def __init__(self, config: S4DNetConfig):
        super().__init__()
        check_type(config, "config", S4DNetConfig, "an S4DNetConfig")
        c = self.config = config
        self.inp = (
            nn.Embedding(c.vocab_size, c.d_model)
            if c.vocab_size is not None
            else nn.Linear(c.d_in, c.d_model)
        )
        self.blocks = nn.ModuleList(S4DBlock(c) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_s4d_net_input(x, self.config.vocab_size, self.config.d_in)
        h = self.inp(x)  # (b, t, d_model)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))  # (b, t, d_out)
