"""Chapter 19: HiPPO-LegS, a state that summarises a signal's whole history online.

HiPPO (Gu, Dao et al., arXiv:2008.07069) keeps the coefficients `c(t)` of the best
approximation of the history `f(s), 0 ≤ s ≤ t` by `N` scaled Legendre polynomials,
`f(s) ≈ Σ_n c_n(t) g_n(s, t)` with `g_n(s, t) = √(2n+1) P_n(2s/t - 1)` (LegS: the
measure is uniform on `[0, t]`; it *scales* with `t`). The coefficients obey the
linear ODE

    `c'(t) = -(1/t) A c(t) + (1/t) B f(t)`,

with `A_nk = √(2n+1)√(2k+1)` for `n > k`, `n + 1` for `n = k`, `0` for
`n < k`, and `B_n = √(2n+1)`. Sign convention: `legs_matrices` returns this
*positive* `A`, as the paper writes it; the state matrix of the SSM is `-A` (stable:
its eigenvalues are `-(n+1)`). `legs_scan` integrates the ODE over a sampled
signal with the bilinear rule (step `1/k` at sample `k`); `legs_reconstruct`
evaluates the approximation.

S4 (Gu, Goel, Ré, arXiv:2111.00396) writes `-A` as *normal plus low rank*:
`-A = S - P Pᵀ` with `P_n = √(n + 1/2)` and `S = -I/2 + (skew-symmetric)`
(`legs_nplr`), so `S` is diagonalised by a unitary matrix and its eigenvalues
have real part `-1/2`; S4D keeps a diagonal state only.

Shapes: `N` the state size, `L` the number of samples, `P` evaluation points.
"""

from __future__ import annotations

import torch

from lecturelib.validate import check_int, check_tensor, describe


def check_float_dtype(dtype) -> None:
    """`dtype` must be a floating-point `torch.dtype` (an integer one would round
    the square roots, or silently give float32)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"dtype must be a floating-point torch.dtype; got {describe(dtype)}"
        )


def legs_matrices(N: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """HiPPO-LegS `(A, B)` of `c' = -(1/t) A c + (1/t) B f` (the paper's signs).
    Shapes: → A (N, N) lower triangular, B (N,)."""
    check_int(N, "N", 1)
    check_float_dtype(dtype)
    q = torch.sqrt(2 * torch.arange(N, dtype=dtype) + 1)
    A = torch.tril(q[:, None] * q[None, :], diagonal=-1)
    A = A + torch.diag(torch.arange(N, dtype=dtype) + 1)
    return A, q.clone()


def legs_nplr(N: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """The normal plus low-rank form of S4: `(S, P)` with `-A = S - P Pᵀ`,
    `P_n = √(n + 1/2)` and `S + Sᵀ = -I` (`S` is normal). Shapes: `S (N, N)`,
    `P (N,)`."""
    check_int(N, "N", 1)
    check_float_dtype(dtype)
    A, _ = legs_matrices(N, dtype)
    P = torch.sqrt(torch.arange(N, dtype=dtype) + 0.5)
    return -A + P[:, None] * P[None, :], P


def check_vector(value, name: str, what: str) -> None:
    """`value` must be a 1-D float tensor (`what` names its entries): a TypeError for
    another kind of object, a ValueError for another shape."""
    message = f"{name} must be a 1-D float tensor of {what}; got {describe(value)}"
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise TypeError(message)
    if value.dim() != 1:
        raise ValueError(message)


def check_signal(f) -> None:
    """`f` must be a 1-D float tensor of at least one sample."""
    check_vector(f, "f", "samples (L,)")
    if f.numel() < 1:
        raise ValueError("f must hold at least one sample; got an empty tensor")


def legs_scan(f: torch.Tensor, N: int) -> torch.Tensor:
    """The LegS coefficients `c_k` of `f_1 … f_k` after each sample (bilinear steps).
    Shapes: f (L,) → (L, N), computed on the CPU, returned on f's device."""
    check_signal(f)
    A, B = legs_matrices(N, torch.float64)
    eye = torch.eye(N, dtype=torch.float64)
    c = torch.zeros(N, dtype=torch.float64)
    out = []
    for k, value in enumerate(f.double().tolist(), start=1):
        rhs = (eye - A / (2 * k)) @ c + B * value / k
        c = torch.linalg.solve_triangular(eye + A / (2 * k), rhs[:, None], upper=False)[
            :, 0
        ]
        out.append(c)
    return torch.stack(out).to(f)


def legendre(n_max: int, x: torch.Tensor) -> torch.Tensor:
    """Legendre polynomials `P_0 … P_{n_max-1}` at `x` (Bonnet's recurrence
    `(n+1)P_{n+1} = (2n+1)x P_n - n P_{n-1}`). Shapes: x `(P,)` → `(n_max, P)`."""
    check_int(n_max, "n_max", 1)
    check_tensor(x, "x", "(P,) of points in [-1, 1]")
    P = [torch.ones_like(x), x]
    for n in range(1, n_max - 1):
        P.append(((2 * n + 1) * x * P[n] - n * P[n - 1]) / (n + 1))
    return torch.stack(P[:n_max])


def check_reconstruct(c, s) -> None:
    """The arguments of `legs_reconstruct`."""
    check_vector(c, "c", "N coefficients")
    if c.numel() < 1:
        raise ValueError("c must hold at least one coefficient; got an empty tensor")
    check_vector(s, "s", "relative times")
    if s.numel() and not ((s >= 0) & (s <= 1)).all():  # NaN is not in [0, 1] either
        real, nan = s[~s.isnan()], int(s.isnan().sum())
        got = [f"{nan} NaN"] if nan else []
        if real.numel():
            got.insert(0, f"values from {real.min().item():g} to {real.max().item():g}")
        raise ValueError(
            f"s must lie in [0, 1] (a fraction of the history); got {', '.join(got)}"
        )


def legs_reconstruct(c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """`Σ_n c_n √(2n+1) P_n(2s - 1)` at relative times `s` (1 now, 0 the start)."""
    check_reconstruct(c, s)
    N = c.shape[0]
    q = torch.sqrt(2 * torch.arange(N, dtype=c.dtype, device=c.device) + 1)
    return (c * q) @ legendre(N, 2 * s.to(c) - 1)
