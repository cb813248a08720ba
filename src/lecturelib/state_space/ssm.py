"""Chapter 19: linear state-space models (SSMs), their two computing modes, and S4D.

A continuous linear time-invariant system ``h'(τ) = A h(τ) + B x(τ)``,
``y(τ) = C h(τ)`` is discretised with a step ``Δ`` (:func:`discretize_zoh`, zero-order
hold, or :func:`discretize_bilinear`) into the linear recurrence
``h_k = Ā h_{k-1} + B̄ x_k``, ``y_k = C h_k`` (:func:`ssm_recurrent`: a linear RNN).
Unrolled, the output is a causal convolution of the input with the kernel
``K̄ = (CB̄, CĀB̄, …, CĀ^{L-1}B̄)`` (:func:`ssm_kernel`), computed for the whole
sequence at once by FFT (:func:`ssm_convolve`). Both modes give the same numbers (tests
assert it for dense, real diagonal and complex diagonal ``A``).

:class:`S4D` (Gu, Gupta et al., arXiv:2206.11893) is one such SSM per channel with a
diagonal complex ``A`` initialised as S4D-Lin (``A_n = -1/2 + iπn``) or S4D-Inv
(``A_n = -1/2 + i(N/π)(N/(2n+1) - 1)``), a learned step ``Δ`` per channel and a skip
``D``; it uses zero-order hold where the S4D paper also offers the bilinear rule.
:class:`S4DNet` stacks S4D layers into a small sequence model.

Conventions. Matrices act on column vectors. ``A`` is either dense ``(N, N)`` (then
``B`` and ``C`` are ``(N,)``) or diagonal, given by its diagonal ``(..., N)`` (then
``B`` and ``C`` have the same shape; the leading axes are independent SSMs, e.g. one per
channel). Outputs are real: with complex ``A``/``B``/``C`` the output is ``Re(C h)``.
Sequences run along the last axis: ``x`` is ``(..., L)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.validate import check_int, check_number, describe

INITS = ("lin", "inv")


def _check_tensor(value, name: str, what: str) -> None:
    if not isinstance(value, torch.Tensor) or not (
        value.is_floating_point() or value.is_complex()
    ):
        raise TypeError(
            f"{name} must be a float or complex tensor {what}; got {describe(value)}"
        )


def check_dt(dt) -> None:
    """``dt`` must be a positive number or a float tensor of positive steps."""
    if isinstance(dt, torch.Tensor):
        if not dt.is_floating_point():
            raise TypeError(
                f"dt must be a positive float or a float tensor; got {describe(dt)}"
            )
        if not bool(torch.isfinite(dt).all()) or bool((dt <= 0).any()):
            raise ValueError(
                f"dt (the step Δ) must be > 0 and finite; got values from "
                f"{dt.min().item():g} to {dt.max().item():g}"
            )
        return
    if isinstance(dt, bool) or not isinstance(dt, (int, float)):
        raise TypeError(
            f"dt must be a positive float or a float tensor; got {describe(dt)}"
        )
    if not math.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt (the step Δ) must be > 0 and finite; got {dt!r}")


def is_diagonal(A: torch.Tensor, B: torch.Tensor) -> bool:
    """Which form ``(A, B)`` take: ``True`` for diagonals of equal shape ``(..., N)``,
    ``False`` for a dense ``(N, N)`` with ``B (N,)``; an error for anything else."""
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
    """``C`` must have the shape of ``A`` (diagonal) or of ``B`` (dense)."""
    _check_tensor(C, "C", "(N,) or (..., N)")
    want = tuple(A.shape) if diagonal else tuple(A.shape[:1])
    if tuple(C.shape) != want:
        raise ValueError(
            f"state sizes do not match: C must have shape {want} like "
            f"{'A' if diagonal else 'B'}; got C {tuple(C.shape)}"
        )


def check_one_step(dt) -> None:
    """A dense ``A`` takes one step: ``dt`` a number or a one-element tensor."""
    if isinstance(dt, torch.Tensor) and dt.numel() != 1:
        raise ValueError(
            f"dense A takes one step dt; got dt of shape {tuple(dt.shape)}"
        )


def discretize_zoh(A: torch.Tensor, B: torch.Tensor, dt):
    """Zero-order hold: ``Ā = exp(ΔA)``, ``B̄ = (ΔA)^{-1}(exp(ΔA) - I)·ΔB``.

    Dense ``A (N, N)``, ``B (N,)``, one step ``dt``: ``B̄`` is the last column of
    ``exp(Δ·[[A, B], [0, 0]])``, which equals ``∫_0^Δ e^{As} ds·B``, the formula
    above, also when ``A`` is singular. Diagonal ``A, B (..., N)``: elementwise, ``dt``
    a number or a tensor that broadcasts against ``A`` (``(H, 1)``: one step per
    channel); where ``A_n = 0`` the limit ``B̄_n = ΔB_n``.

    Shapes: returns ``(Ā, B̄)`` shaped like ``(A, B)``.
    """
    diagonal = is_diagonal(A, B)
    check_dt(dt)
    if diagonal:
        Abar = torch.exp(dt * A)
        safe = torch.where(A == 0, torch.ones_like(A), A)
        Bbar = torch.where(A == 0, dt * B, (Abar - 1) / safe * B)
        return Abar, Bbar
    check_one_step(dt)
    n = A.shape[0]
    M = torch.zeros(
        n + 1, n + 1, dtype=torch.promote_types(A.dtype, B.dtype), device=A.device
    )
    M[:n, :n], M[:n, n] = A, B  # [[A, B], [0, 0]]
    E = torch.linalg.matrix_exp(M * dt)
    return E[:n, :n], E[:n, n]


def discretize_bilinear(A: torch.Tensor, B: torch.Tensor, dt):
    """Bilinear (Tustin) rule: ``Ā = (I - Δ/2·A)^{-1}(I + Δ/2·A)``,
    ``B̄ = (I - Δ/2·A)^{-1}·ΔB`` (used by S4; shapes as :func:`discretize_zoh`)."""
    diagonal = is_diagonal(A, B)
    check_dt(dt)
    if diagonal:
        back = 1 - dt / 2 * A
        return (1 + dt / 2 * A) / back, dt * B / back
    check_one_step(dt)
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    back = eye - dt / 2 * A
    return torch.linalg.solve(back, eye + dt / 2 * A), torch.linalg.solve(back, dt * B)


def check_x(x) -> None:
    """``x`` must be a real float tensor ``(..., L)`` with ``L >= 1``."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a real float tensor (..., L); got {describe(x)}")
    if x.dim() < 1 or x.shape[-1] < 1:
        raise ValueError(f"x must be (..., L) with L >= 1; got shape {tuple(x.shape)}")


def skip(D, x: torch.Tensor) -> torch.Tensor:
    """The skip term ``D x``: ``D`` a number, or one value per sequence of ``x``."""
    if isinstance(D, torch.Tensor):
        return D.unsqueeze(-1) * x if D.dim() else D * x
    check_number(D, "D", -math.inf)
    return D * x


def ssm_recurrent(Abar, Bbar, C, x, D=None, h0=None, return_state: bool = False):
    """The discrete SSM as a linear RNN, one step at a time:
    ``h_k = Ā h_{k-1} + B̄ x_k``, ``y_k = Re(C h_k) + D x_k``.

    Diagonal ``Ā, B̄, C (..., N)`` broadcast against the leading axes of ``x``; a dense
    ``Ā (N, N)`` with ``B̄, C (N,)`` applies to every sequence. ``h0``: the state to
    start from (zeros if None).

    Shapes: x ``(..., L)`` → y ``(..., L)``; with ``return_state`` also the last state
    ``(..., N)``.
    """
    diagonal = is_diagonal(Abar, Bbar)
    check_C(Abar, C, diagonal)
    check_x(x)
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


def ssm_kernel(Abar, Bbar, C, L: int) -> torch.Tensor:
    """The convolution kernel ``K̄_l = Re(C Ā^l B̄)`` for ``l = 0 … L-1``.

    Diagonal inputs: ``K̄_l = Re(Σ_n C_n B̄_n Ā_n^l)``, one Vandermonde product.
    Dense: ``L`` matrix-vector products.

    Shapes: diagonal ``(..., N)`` → ``(..., L)``; dense → ``(L,)``.
    """
    diagonal = is_diagonal(Abar, Bbar)
    check_C(Abar, C, diagonal)
    check_int(L, "L", 1)
    if diagonal:
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


def ssm_convolve(x, K, D=None, method: str = "fft") -> torch.Tensor:
    """The causal convolution ``y_k = Σ_{j≤k} K̄_j x_{k-j}`` (``+ D x_k``).

    ``method="fft"`` pads both to ``2L``, so that the FFT's circular convolution does
    not wrap around, and costs ``O(L log L)``; ``"direct"`` is the plain ``O(L²)`` sum,
    the reference. ``D``: a number or one value per sequence.

    Shapes: x ``(..., L)``, K ``(..., L)`` broadcasting against x → ``(..., L)``.
    """
    check_x(x)
    if not isinstance(K, torch.Tensor) or not K.is_floating_point():
        raise TypeError(f"K must be a real float tensor (..., L); got {describe(K)}")
    L = x.shape[-1]
    if K.dim() < 1 or K.shape[-1] != L:
        raise ValueError(
            f"K must be (..., L) with the L = {L} of x; got shape {tuple(K.shape)}"
        )
    if method == "fft":
        n = 2 * L
        y_f = torch.fft.rfft(x, n=n) * torch.fft.rfft(K, n=n)
        y = torch.fft.irfft(y_f, n=n)[..., :L]
    elif method == "direct":
        K, x = torch.broadcast_tensors(K, x)
        y = torch.stack(
            [(K[..., : k + 1].flip(-1) * x[..., : k + 1]).sum(-1) for k in range(L)],
            dim=-1,
        )
    else:
        raise ValueError(f"method must be 'fft' or 'direct'; got {method!r}")
    if D is not None:
        y = y + skip(D, x)
    return y


def s4d_init(d_state: int, init: str = "inv") -> torch.Tensor:
    """The diagonal of S4D's ``A``: ``d_state // 2`` complex modes (their conjugates are
    implied), S4D-Lin ``A_n = -1/2 + iπn`` or S4D-Inv
    ``A_n = -1/2 + i(N/π)(N/(2n+1) - 1)`` with ``N = d_state // 2``.

    Shapes: ``(d_state // 2,)`` complex128.
    """
    check_int(d_state, "d_state", 2)
    if d_state % 2:
        raise ValueError(
            f"d_state must be even (d_state/2 complex conjugate pairs); got {d_state}"
        )
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}; got {init!r}")
    N = d_state // 2
    n = torch.arange(N, dtype=torch.float64)
    imag = math.pi * n if init == "lin" else N / math.pi * (N / (2 * n + 1) - 1)
    return torch.complex(torch.full_like(n, -0.5), imag)


class S4D(nn.Module):
    """One diagonal SSM per channel (S4D), causal.

    Channel ``h`` has a learned step ``Δ_h`` (log-uniform in ``[dt_min, dt_max]`` at
    init), ``A_h = -exp(log_A_real) + i·A_imag`` (``d_state // 2`` modes from
    :func:`s4d_init`), ``B = 1`` (absorbed into ``C``), a complex ``C_h`` and a real
    skip ``D_h``. Each mode counts with its conjugate:
    ``K̄ = 2·Re(Σ_n C_n B̄_n Ā_n^l)``.
    :meth:`forward` convolves by FFT; :meth:`recurrent` and :meth:`step` run the same
    layer as a recurrence.

    Shapes: ``(b, t, d_model)`` → ``(b, t, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 64,
        init: str = "inv",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
    ):
        super().__init__()
        check_int(d_model, "d_model", 1)
        A = s4d_init(d_state, init)  # (N/2,)
        check_number(dt_min, "dt_min", 0.0, low_open=True)
        check_number(dt_max, "dt_max", dt_min)
        self.d_model, self.d_state, self.init = d_model, d_state, init
        u = torch.rand(d_model, dtype=torch.float64)
        log_dt = math.log(dt_min) + u * (math.log(dt_max) - math.log(dt_min))
        self.log_dt = nn.Parameter(log_dt.float())  # (d_model,)
        self.log_A_real = nn.Parameter(A.real.neg().log().float().repeat(d_model, 1))
        self.A_imag = nn.Parameter(A.imag.float().repeat(d_model, 1))
        C = torch.randn(d_model, d_state // 2, dtype=torch.cfloat) * 0.5**0.5
        self.C = nn.Parameter(torch.view_as_real(C))  # (d_model, N/2, 2)
        self.D = nn.Parameter(torch.randn(d_model))

    def discrete(self):
        """``(Ā, B̄, 2C)``, each ``(d_model, d_state // 2)`` complex (ZOH, B = 1)."""
        A = torch.complex(-self.log_A_real.exp(), self.A_imag)
        dt = self.log_dt.exp().unsqueeze(-1)  # (d_model, 1)
        Abar, Bbar = discretize_zoh(A, torch.ones_like(A), dt)
        return Abar, Bbar, 2 * torch.view_as_complex(self.C)

    def kernel(self, L: int) -> torch.Tensor:
        """The real kernel ``K̄``. Shapes: → ``(d_model, L)``."""
        check_int(L, "L", 1)
        return ssm_kernel(*self.discrete(), L)

    def check_input(self, u) -> None:
        if not isinstance(u, torch.Tensor) or not u.is_floating_point() or u.dim() != 3:
            raise ValueError(
                f"S4D input must be a float tensor (b, t, d_model="
                f"{self.d_model}); got {describe(u)}"
            )
        if u.shape[-1] != self.d_model:
            raise ValueError(
                f"S4D input must be (b, t, d_model={self.d_model}); got "
                f"shape {tuple(u.shape)}"
            )

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """Convolutional mode: ``y = K̄ * u + D u`` per channel, by FFT."""
        self.check_input(u)
        x = u.transpose(1, 2)  # (b, d_model, t)
        y = ssm_convolve(x, self.kernel(x.shape[-1]), self.D)
        return y.transpose(1, 2)  # (b, t, d_model)

    def recurrent(self, u: torch.Tensor) -> torch.Tensor:
        """Recurrent mode: the outputs of :meth:`forward`, one step at a time."""
        self.check_input(u)
        y = ssm_recurrent(*self.discrete(), u.transpose(1, 2), self.D)
        return y.transpose(1, 2)

    def step(self, u_t: torch.Tensor, h: torch.Tensor | None = None):
        """One step: ``u_t (b, d_model)`` and the state ``h (b, d_model, d_state // 2)``
        complex (zeros if None) → ``(y_t, h)``."""
        if (
            not isinstance(u_t, torch.Tensor)
            or u_t.dim() != 2
            or u_t.shape[-1] != self.d_model
        ):
            raise ValueError(
                f"u_t must be (b, d_model={self.d_model}); got {describe(u_t)}"
            )
        Abar, Bbar, C2 = self.discrete()
        if h is None:
            h = u_t.new_zeros(u_t.shape[0], *Abar.shape, dtype=Abar.dtype)
        h = Abar * h + Bbar * u_t.unsqueeze(-1)
        return (C2 * h).sum(-1).real + self.D * u_t, h


class S4DBlock(nn.Module):
    """Pre-norm residual block: ``x + Linear(GELU(S4D(LayerNorm(x))))``.

    Shapes: ``(b, t, d_model)`` → ``(b, t, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 64,
        init: str = "inv",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.ssm = S4D(d_model, d_state, init, dt_min, dt_max)
        self.out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(self.out(F.gelu(self.ssm(self.norm(x)))))


class S4DNet(nn.Module):
    """:class:`S4DBlock` layers between an input map and an output head, causal.

    With ``vocab_size`` the input is token ids ``(b, t)`` (embedded); with ``d_in`` it
    is features ``(b, t, d_in)`` (projected).

    Shapes: → ``(b, t, d_out)``.
    """

    def __init__(
        self,
        d_out: int,
        d_model: int = 64,
        n_layers: int = 2,
        d_state: int = 64,
        vocab_size: int | None = None,
        d_in: int | None = None,
        init: str = "inv",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dropout: float = 0.0,
    ):
        super().__init__()
        for name, value in (
            ("d_out", d_out),
            ("d_model", d_model),
            ("n_layers", n_layers),
        ):
            check_int(value, name, 1)
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
        self.vocab_size, self.d_in = vocab_size, d_in
        self.inp = (
            nn.Embedding(vocab_size, d_model)
            if vocab_size is not None
            else nn.Linear(d_in, d_model)
        )
        self.blocks = nn.ModuleList(
            S4DBlock(d_model, d_state, init, dt_min, dt_max, dropout)
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ok = isinstance(x, torch.Tensor)
        if self.vocab_size is not None:
            if not ok or x.dim() != 2 or x.is_floating_point():
                raise ValueError(
                    f"S4DNet with vocab_size takes (b, t) token ids; got {describe(x)}"
                )
        elif (
            not ok
            or x.dim() != 3
            or not x.is_floating_point()
            or x.shape[-1] != self.d_in
        ):
            raise ValueError(
                f"S4DNet with d_in={self.d_in} takes (b, t, {self.d_in}) "
                f"features; got {describe(x)}"
            )
        h = self.inp(x)  # (b, t, d_model)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))  # (b, t, d_out)
