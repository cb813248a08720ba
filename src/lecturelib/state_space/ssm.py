"""Chapter 19: linear state-space models (SSMs), their two computing modes, and S4D.

A continuous linear time-invariant system `h'(τ) = A h(τ) + B x(τ)`,
`y(τ) = C h(τ)` is discretised with a step `Δ` (`discretize_zoh`, zero-order
hold, or `discretize_bilinear`) into the linear recurrence
`h_k = Ā h_{k-1} + B̄ x_k`, `y_k = C h_k` (`ssm_recurrent`: a linear RNN).
Unrolled, the output is a causal convolution of the input with the kernel
`K̄ = (CB̄, CĀB̄, …, CĀ^{L-1}B̄)` (`ssm_kernel`), computed for the whole
sequence at once by FFT (`ssm_convolve`). Both modes give the same numbers (tests
assert it for dense, real diagonal and complex diagonal `A`). The S4D layer built on
them is in `lecturelib.state_space.s4d`.

Conventions. Matrices act on column vectors. `A` is either dense `(N, N)` (then
`B` and `C` are `(N,)`) or diagonal, given by its diagonal `(..., N)` (then
`B` and `C` have the same shape; the leading axes are independent SSMs, e.g. one per
channel). Outputs are real: with complex `A`/`B`/`C` the output is `Re(C h)`.
Sequences run along the last axis: `x` is `(..., L)`.
"""

from __future__ import annotations

import math

import torch

from lecturelib.validate import check_int, check_number, check_on_device, describe


def _check_tensor(value, name: str, what: str) -> None:
    if not isinstance(value, torch.Tensor) or not (
        value.is_floating_point() or value.is_complex()
    ):
        raise TypeError(
            f"{name} must be a float or complex tensor {what}; got {describe(value)}"
        )


def check_dt(dt) -> None:
    """`dt` must be a positive number or a float tensor of positive steps."""
    if isinstance(dt, torch.Tensor):
        if not dt.is_floating_point():
            raise TypeError(
                f"dt must be a positive float or a float tensor; got {describe(dt)}"
            )
        if dt.numel():
            check_on_device(
                (torch.isfinite(dt) & (dt > 0)).all(),
                "dt (the step Δ) must be > 0 and finite",
                lambda: f"; got values from {dt.min().item():g} to {dt.max().item():g}",
            )
        return
    if isinstance(dt, bool) or not isinstance(dt, (int, float)):
        raise TypeError(
            f"dt must be a positive float or a float tensor; got {describe(dt)}"
        )
    if not math.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt (the step Δ) must be > 0 and finite; got {dt!r}")


def is_diagonal(A: torch.Tensor, B: torch.Tensor) -> bool:
    """Which form `(A, B)` take: `True` for diagonals of equal shape `(..., N)`,
    `False` for a dense `(N, N)` with `B (N,)`; an error for anything else."""
    _check_tensor(A, "A", "(N, N) or a diagonal (..., N)")
    _check_tensor(B, "B", "(N,) or (..., N)")
    if A.dim() >= 1 and A.shape == B.shape:
        return True
    if A.dim() == 2 and A.shape[0] == A.shape[1] and B.shape == A.shape[:1]:
        return False
    raise ValueError(
        f"state sizes do not match: A must be (N, N) with B (N,), or a "
        f"diagonal (..., N) with B of the same shape; got A "
        f"{tuple(A.shape)} and B {tuple(B.shape)}"
    )


def check_C(A: torch.Tensor, C: torch.Tensor, diagonal: bool) -> None:
    """`C` must have the shape of `A` (diagonal) or of `B` (dense)."""
    _check_tensor(C, "C", "(N,) or (..., N)")
    want = tuple(A.shape) if diagonal else tuple(A.shape[:1])
    if tuple(C.shape) != want:
        raise ValueError(
            f"state sizes do not match: C must have shape {want} like "
            f"{'A' if diagonal else 'B'}; got C {tuple(C.shape)}"
        )


def check_one_step(dt) -> None:
    """A dense `A` takes one step: `dt` a number or a one-element tensor."""
    if isinstance(dt, torch.Tensor) and dt.numel() != 1:
        raise ValueError(
            f"dense A takes one step dt; got dt of shape {tuple(dt.shape)}"
        )


def check_discretize(A, B, dt) -> None:
    """The arguments of `discretize_zoh` and `discretize_bilinear`."""
    diagonal = is_diagonal(A, B)
    check_dt(dt)
    if not diagonal:
        check_one_step(dt)


def discretize_zoh(A: torch.Tensor, B: torch.Tensor, dt):
    """Zero-order hold `Ā = exp(ΔA)`, `B̄ = (ΔA)^{-1}(exp(ΔA) - I)·ΔB` (any `A`).
    Shapes: A (N, N), B (N,) or diagonal A, B (..., N), dt broadcasting → as (A, B)."""
    check_discretize(A, B, dt)
    if is_diagonal(A, B):
        Abar = torch.exp(dt * A)
        safe = torch.where(A == 0, torch.ones_like(A), A)
        Bbar = torch.where(A == 0, dt * B, (Abar - 1) / safe * B)
        return Abar, Bbar
    n = A.shape[0]
    M = torch.zeros(
        n + 1, n + 1, dtype=torch.promote_types(A.dtype, B.dtype), device=A.device
    )
    M[:n, :n], M[:n, n] = A, B  # [[A, B], [0, 0]]
    E = torch.linalg.matrix_exp(M * dt)
    return E[:n, :n], E[:n, n]


def check_bilinear(A, B, dt) -> None:
    """The arguments of `discretize_bilinear`: those of the discretisations, and
    an `I - Δ/2·A` that can be inverted (`Δ/2·A_n = 1` for a diagonal `A`: an
    infinite `Ā_n`)."""
    check_discretize(A, B, dt)
    if is_diagonal(A, B):
        singular = bool(((1 - dt / 2 * A) == 0).any())
    else:
        eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
        back = (eye - dt / 2 * A).to(torch.promote_types(A.dtype, torch.float64))
        singular = int(torch.linalg.matrix_rank(back)) < A.shape[0]
    if singular:
        raise ValueError(
            "the bilinear rule divides by I - Δ/2·A, which is singular here (an "
            "eigenvalue of A equals 2/Δ): choose another step dt or use "
            "discretize_zoh"
        )


def discretize_bilinear(A: torch.Tensor, B: torch.Tensor, dt):
    """Bilinear (Tustin) rule: `Ā = (I - Δ/2·A)^{-1}(I + Δ/2·A)`,
    `B̄ = (I - Δ/2·A)^{-1}·ΔB` (used by S4; shapes as `discretize_zoh`)."""
    check_bilinear(A, B, dt)
    if is_diagonal(A, B):
        back = 1 - dt / 2 * A
        return (1 + dt / 2 * A) / back, dt * B / back
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    back = eye - dt / 2 * A
    return torch.linalg.solve(back, eye + dt / 2 * A), torch.linalg.solve(back, dt * B)


def check_x(x) -> None:
    """`x` must be a real float tensor `(..., L)` with `L >= 1`."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a real float tensor (..., L); got {describe(x)}")
    if x.dim() < 1 or x.shape[-1] < 1:
        raise ValueError(f"x must be (..., L) with L >= 1; got shape {tuple(x.shape)}")


def skip(D, x: torch.Tensor) -> torch.Tensor:
    """The skip term `D x`: `D` a number, or one value per sequence of `x`."""
    check_skip(D, x)
    if isinstance(D, torch.Tensor):
        return D.unsqueeze(-1) * x if D.dim() else D * x
    return D * x


def check_skip(D, x) -> None:
    """`x` a real float tensor `(..., L)`; `D` a finite number or a tensor of one
    value per sequence, `(...)` with a trailing axis added broadcasting to `x`'s
    shape (a `D` that broadcast past it would give a result of another shape)."""
    check_x(x)
    if not isinstance(D, torch.Tensor):
        check_number(D, "D", -math.inf)
        return
    _check_tensor(D, "D", "(...) of one value per sequence of x")
    try:
        shape = torch.broadcast_shapes(D.shape + (1,), x.shape)
    except RuntimeError:
        shape = None
    if D.dim() and shape != x.shape:
        raise ValueError(
            f"D must be a number or one value per sequence of x, a tensor broadcasting "
            f"to x's {tuple(x.shape[:-1])}; got shape {tuple(D.shape)}"
        )


def check_ssm(Abar, Bbar, C, x, h0=None) -> None:
    """The arguments of `ssm_recurrent`: the state `h0`, if given, must have the
    shape of the states the recurrence computes."""
    diagonal = is_diagonal(Abar, Bbar)
    check_C(Abar, C, diagonal)
    check_x(x)
    if h0 is None:
        return
    if diagonal:
        shape = torch.broadcast_shapes(Abar.shape, x.shape[:-1] + (1,))
    else:
        shape = x.shape[:-1] + Bbar.shape
    if not isinstance(h0, torch.Tensor) or tuple(h0.shape) != tuple(shape):
        raise ValueError(
            f"h0 must be a state of shape {tuple(shape)}; got {describe(h0)}"
        )


def ssm_recurrent(Abar, Bbar, C, x, D=None, h0=None, return_state: bool = False):
    """Linear RNN `h_k = Ā h_{k-1} + B̄ x_k`, `y_k = Re(C h_k) + D x_k`, from `h0` or 0.
    Shapes: x (..., L); Ā, B̄, C (..., N) or dense → y (..., L); last h (..., N)."""
    check_ssm(Abar, Bbar, C, x, h0)
    diagonal = is_diagonal(Abar, Bbar)
    if diagonal:
        shape = torch.broadcast_shapes(Abar.shape, x.shape[:-1] + (1,))
    else:
        shape = x.shape[:-1] + Bbar.shape
    dtype = torch.promote_types(Abar.dtype, x.dtype)
    h = torch.zeros(shape, dtype=dtype, device=x.device) if h0 is None else h0
    ys = []
    for k in range(x.shape[-1]):
        x_k = x[..., k, None]  # (..., 1)
        h = (Abar * h if diagonal else h @ Abar.T) + Bbar * x_k  # (..., N)
        ys.append((C * h).sum(-1).real)
    y = torch.stack(ys, dim=-1)  # (..., L)
    if D is not None:
        y = y + skip(D, x)
    return (y, h) if return_state else y


def check_kernel(Abar, Bbar, C, L) -> None:
    """The arguments of `ssm_kernel`."""
    check_C(Abar, C, is_diagonal(Abar, Bbar))
    check_int(L, "L", 1)


def ssm_kernel(Abar, Bbar, C, L: int) -> torch.Tensor:
    """The convolution kernel `K̄_l = Re(C Ā^l B̄)` for `l = 0 … L-1`.
    Shapes: diagonal Ā, B̄, C (..., N) → (..., L); dense Ā (N, N), B̄, C (N,) → (L,)."""
    check_kernel(Abar, Bbar, C, L)
    if is_diagonal(Abar, Bbar):
        ell = torch.arange(L, device=Abar.device, dtype=Abar.real.dtype)
        # Ā^l = exp(l·log Ā): several times faster than complex pow, same values
        log_A = Abar.to(torch.promote_types(Abar.dtype, torch.complex64)).log()
        powers = torch.exp(log_A.unsqueeze(-1) * ell)  # (..., N, L)
        CB = (C * Bbar).to(powers.dtype)
        return torch.einsum("...n,...nl->...l", CB, powers).real
    out, v = [], Bbar
    for _ in range(L):
        out.append((C * v).sum().real)
        v = Abar @ v  # Ā^l B̄
    return torch.stack(out)


def check_convolve(x, K, method) -> None:
    """The arguments of `ssm_convolve`."""
    check_x(x)
    if not isinstance(K, torch.Tensor) or not K.is_floating_point():
        raise TypeError(f"K must be a real float tensor (..., L); got {describe(K)}")
    L = x.shape[-1]
    if K.dim() < 1 or K.shape[-1] != L:
        raise ValueError(
            f"K must be (..., L) with the L = {L} of x; got shape {tuple(K.shape)}"
        )
    if method not in ("fft", "direct"):
        raise ValueError(f"method must be 'fft' or 'direct'; got {method!r}")


def ssm_convolve(x, K, D=None, method: str = "fft") -> torch.Tensor:
    """Causal `y_k = Σ_{j≤k} K̄_j x_{k-j} (+ D x_k)`, by padded FFT or `direct` sum.
    Shapes: x (..., L), K (..., L) broadcasting to x, D number or (...) → (..., L)."""
    check_convolve(x, K, method)
    L = x.shape[-1]
    if method == "fft":  # in float32 at least: cuFFT's float16 takes powers of 2 only
        n, wide = 2 * L, torch.promote_types(x.dtype, torch.float32)
        y_f = torch.fft.rfft(x.to(wide), n=n) * torch.fft.rfft(K.to(wide), n=n)
        y = torch.fft.irfft(y_f, n=n)[..., :L]
    else:  # direct
        K, x = torch.broadcast_tensors(K, x)
        y = torch.stack(
            [(K[..., : k + 1].flip(-1) * x[..., : k + 1]).sum(-1) for k in range(L)],
            dim=-1,
        )
    if D is not None:
        y = y + skip(D, x)
    return y
