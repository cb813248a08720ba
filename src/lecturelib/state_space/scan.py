"""Chapter 20: the selective scan of Mamba, three ways, and a Triton kernel.

A selective SSM (Gu & Dao, 2023, arXiv:2312.00752) runs, for every channel `d` and
state index `n`, the linear recurrence

    h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t,        y_t = C_t · h_t + D u_t,

whose step `Δ_t` and matrices `B_t`, `C_t` depend on the input.
`selective_scan_ref` is the plain loop over time, written like
`selective_scan_ref` of the `mamba_ssm` package (the oracle). The recurrence `h_t =
a_t h_{t-1} + x_t` is associative in the pairs `(a, x)`, so it can also be computed
by a parallel scan (`linear_scan_parallel`, Hillis & Steele, 1986: `log2 t`
vectorised steps) or by chunks (`linear_scan_chunked`: a short loop inside all
chunks at once, then a short loop that carries the state from chunk to chunk).
`selective_scan` uses either of them. `triton_scan` returns a fused Triton
kernel (forward only), interpreted on a CPU.

Simplifications: `A` is real and diagonal (`(d, n)`, as in Mamba), the axes are
`(b, t, d)` as everywhere in this book (`mamba_ssm` uses `(b, d, t)`), and the
fused kernel does not recompute states in a backward pass (it has none).

Shapes: u, Δ, z `(b, t, d)`; A `(d, n)`; B, C `(b, t, n)`; D `(d,)`;
states `(b, t, d, n)`.
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F
from einops import einsum

from lecturelib.runtime import patch_triton_interpreter
from lecturelib.validate import (
    check_int,
    check_on_device,
    check_tensor,
    check_type,
    describe,
)

METHODS = ("loop", "parallel", "chunked")


def check_inputs(u, delta, A, B, C, D=None, z=None, h0=None) -> None:
    """Validate the inputs of a selective scan: shapes that agree, and `Δ > 0`."""
    check_tensor(u, "u", "(b, t, d)", 3)
    check_tensor(delta, "delta", "(b, t, d)", 3)
    check_tensor(A, "A", "(d, n)", 2)
    check_tensor(B, "B", "(b, t, n)", 3)
    check_tensor(C, "C", "(b, t, n)", 3)
    b, t, d = u.shape
    if delta.shape != u.shape:
        raise ValueError(
            f"delta must have u's shape {tuple(u.shape)}; got {tuple(delta.shape)}"
        )
    if A.shape[0] != d:
        raise ValueError(
            f"A must have one row per channel, ({d}, n); got {tuple(A.shape)}"
        )
    n = A.shape[1]
    for name, value in (("B", B), ("C", C)):
        if value.shape != (b, t, n):
            raise ValueError(
                f"mismatched state sizes: {name} must be (b, t, n) = "
                f"{(b, t, n)} (n from A); got {tuple(value.shape)}"
            )
    if D is not None:
        check_type(D, "D", torch.Tensor, f"a ({d},) tensor or None")
        if D.shape != (d,):
            raise ValueError(f"D must be a ({d},) tensor or None; got {describe(D)}")
    if z is not None:
        check_type(z, "z", torch.Tensor, "a tensor or None")
        if z.shape != u.shape:
            raise ValueError(
                f"z must have u's shape {tuple(u.shape)} or be None; got {describe(z)}"
            )
    if delta.numel():
        check_on_device(
            ((delta > 0) & (delta < math.inf)).all(),
            "delta (Δ) must be > 0 and finite everywhere (an infinite step makes "
            "the states NaN)",
            lambda: (
                f"; got a minimum of {delta.min().item():.3g} and a "
                f"maximum of {delta.max().item():.3g}"
            ),
        )
    check_state(h0, b, d, n)


def check_state(h0, b: int, d: int, n: int) -> None:
    """`h0` must be None or a `(b, d, n)` state."""
    if h0 is None:
        return
    check_type(h0, "h0", torch.Tensor, "a (b, d, n) tensor or None")
    if h0.shape != (b, d, n):
        raise ValueError(
            f"mismatched state sizes: h0 must be (b, d, n) = {(b, d, n)}; "
            f"got {describe(h0)}"
        )


def selective_scan_ref(u, delta, A, B, C, D=None, z=None, h0=None, return_state=False):
    """Reference selective scan, a plain loop; `return_state`: also last h (b, d, n).
    Shapes: u, delta, z, y (b, t, d); A (d, n); B, C (b, t, n); D (d,); h0 (b, d, n)."""
    check_inputs(u, delta, A, B, C, D, z, h0)
    b, t, d = u.shape
    dtype, wide = u.dtype, torch.promote_types(u.dtype, torch.float32)
    u, delta, A, B, C = (x.to(wide) for x in (u, delta, A, B, C))  # a float32 state
    deltaA = torch.exp(delta[..., None] * A)  # (b, t, d, n): float16 rounds e^-0.001
    deltaB_u = einsum(delta, B, u, "b t d, b t n, b t d -> b t d n")
    h = u.new_zeros(b, d, A.shape[1]) if h0 is None else h0
    ys = []
    for i in range(t):
        h = deltaA[:, i] * h + deltaB_u[:, i]  # (b, d, n)
        ys.append(einsum(h, C[:, i], "b d n, b n -> b d"))
    y = torch.stack(ys, dim=1) if ys else u.new_zeros(b, 0, d)  # (b, t, d)
    if D is not None:
        y = y + u * D
    if z is not None:
        y = y * F.silu(z)
    y = y.to(dtype)
    return (y, h) if return_state else y


def check_pairs(a, x, h0, chunk: int = 1) -> None:
    """The arguments of the linear scans: pairs `(a, x)` of one shape, a state
    `h0` that fits them and (chunked) a chunk size >= 1."""
    check_tensor(a, "a", "(b, t, d, n)", 4)
    check_tensor(x, "x", "(b, t, d, n)", 4)
    if a.shape != x.shape:
        raise ValueError(
            f"a and x must have the same shape; got {tuple(a.shape)} "
            f"and {tuple(x.shape)}"
        )
    b, _, d, n = x.shape
    check_state(h0, b, d, n)
    check_int(chunk, "chunk", 1)


def linear_scan_loop(a, x, h0=None):
    """All states of `h_t = a_t h_{t-1} + x_t` by a loop over time.
    Shapes: a, x (b, t, d, n), h0 (b, d, n) or None (zeros) → h (b, t, d, n)."""
    check_pairs(a, x, h0)
    h = x.new_zeros(x.shape[0], *x.shape[2:]) if h0 is None else h0  # (b, d, n)
    hs = []
    for a_i, x_i in zip(a.unbind(1), x.unbind(1)):
        h = a_i * h + x_i
        hs.append(h)
    return torch.stack(hs, dim=1) if hs else x.clone()


def linear_scan_parallel(a, x, h0=None):
    """`linear_scan_loop` by a Hillis–Steele scan (`log2 t` steps)."""
    check_pairs(a, x, h0)
    if h0 is not None:  # fold the initial state into the first input
        x = torch.cat([x[:, :1] + a[:, :1] * h0[:, None], x[:, 1:]], dim=1)
    k = 1
    while k < x.shape[1]:
        # (a_i, x_i) after (a_{i-k}, x_{i-k}): (a_i a_{i-k}, a_i x_{i-k} + x_i)
        x = torch.cat([x[:, :k], a[:, k:] * x[:, :-k] + x[:, k:]], dim=1)
        a = torch.cat([a[:, :k], a[:, k:] * a[:, :-k]], dim=1)
        k *= 2
    return x


def linear_scan_chunked(a, x, h0=None, chunk: int = 32):
    """`linear_scan_loop` scanned in chunks of `chunk` steps."""
    check_pairs(a, x, h0, chunk)
    b, t, d, n = x.shape
    if t == 0:  # no step, no state
        return x.clone()
    pad = -t % chunk
    if pad:  # a = 1, x = 0 after the end leave the states unchanged
        a, x = F.pad(a, (0, 0, 0, 0, 0, pad), value=1.0), F.pad(x, (0, 0, 0, 0, 0, pad))
    c = (t + pad) // chunk  # chunks
    a, x = a.unflatten(1, (c, chunk)), x.unflatten(1, (c, chunk))  # (b, c, T, d, n)
    local = linear_scan_loop(a.flatten(0, 1), x.flatten(0, 1)).unflatten(0, (b, c))
    decay = torch.cumprod(a, dim=2)  # (b, c, T, d, n)
    carry = x.new_zeros(b, d, n) if h0 is None else h0
    starts = []
    for decay_j, local_j in zip(decay[:, :, -1].unbind(1), local[:, :, -1].unbind(1)):
        starts.append(carry)
        carry = decay_j * carry + local_j
    h = local + decay * torch.stack(starts, dim=1)[:, :, None]
    return h.flatten(1, 2)[:, :t]


SCANS = {
    "loop": linear_scan_loop,
    "parallel": linear_scan_parallel,
    "chunked": linear_scan_chunked,
}


def selective_scan(
    u,
    delta,
    A,
    B,
    C,
    D=None,
    z=None,
    h0=None,
    method: str = "chunked",
    return_state: bool = False,
):
    """The selective scan through one of `SCANS` (`loop`, `parallel`,
    `chunked`); equal to `selective_scan_ref`.

    Shapes: as `selective_scan_ref`.
    """
    if method not in SCANS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    check_inputs(u, delta, A, B, C, D, z, h0)
    dtype, wide = u.dtype, torch.promote_types(u.dtype, torch.float32)
    u, delta, A, B, C = (x.to(wide) for x in (u, delta, A, B, C))  # a float32 state
    deltaA = torch.exp(delta[..., None] * A)  # (b, t, d, n)
    deltaB_u = (delta * u)[..., None] * B[:, :, None, :]  # (b, t, d, n)
    h = SCANS[method](deltaA, deltaB_u, h0)  # (b, t, d, n)
    y = einsum(h, C, "b t d n, b t n -> b t d")
    if D is not None:
        y = y + u * D
    if z is not None:
        y = y * F.silu(z)
    y = y.to(dtype)
    if not return_state:
        return y
    if u.shape[1]:
        return y, h[:, -1]
    return y, u.new_zeros(u.shape[0], *A.shape) if h0 is None else h0  # no step


def check_ssd(a, B, C, x=None) -> None:
    """The arguments of the state-space dual: `a` `(b, l)` in `(0, 1]`; `B`,
    `C` `(b, l, n)` and `x` `(b, l, d)` of `a`'s batch and length."""
    check_tensor(a, "a", "(b, l)", 2)
    check_tensor(B, "B", "(b, l, n)", 3)
    check_tensor(C, "C", "(b, l, n)", 3)
    if B.shape[:2] != a.shape or C.shape != B.shape:
        raise ValueError(
            f"mismatched lengths: B and C must be (b, l, n) with (b, l) = "
            f"{tuple(a.shape)} from a; got {tuple(B.shape)} and {tuple(C.shape)}"
        )
    if x is not None:
        check_tensor(x, "x", "(b, l, d)", 3)
        if x.shape[:2] != a.shape:
            raise ValueError(
                f"mismatched lengths: x must be (b, l, d) with (b, l) = "
                f"{tuple(a.shape)} from a; got {tuple(x.shape)}"
            )
    if a.numel() and not bool(((a > 0) & (a <= 1)).all()):
        raise ValueError(
            f"a must be in (0, 1] everywhere (a decay per step); got a minimum of "
            f"{a.min().item():.3g} and a maximum of {a.max().item():.3g}"
        )


def check_segsum(log_a) -> None:
    """`log_a` must be a float tensor `(..., l)` (a 0-d one has no sequence)."""
    check_tensor(log_a, "log_a", "(..., l)")
    if log_a.dim() < 1:
        raise ValueError("log_a must be (..., l) with at least one axis; got shape ()")


def segsum(log_a):
    """`S[..., i, j] = log a_{j+1} + ... + log a_i` for `j <= i`, else `-inf`.

    Shapes: log_a `(b, l)` → `(b, l, l)`.
    """
    check_segsum(log_a)
    t = log_a.shape[-1]
    x = log_a[..., :, None].expand(*log_a.shape, t)  # x[..., k, j] = log a_k
    below = torch.tril(torch.ones(t, t, dtype=torch.bool, device=log_a.device), -1)
    s = torch.cumsum(x.masked_fill(~below, 0), dim=-2)  # sum over j < k <= i
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=log_a.device))
    return s.masked_fill(~causal, -math.inf)


def ssd_matrix(a, B, C):
    """Mamba-2's matrix `M = L ∘ (C Bᵀ)`, `L[i, j] = a_{j+1} ⋯ a_i` (`j <= i`).

    Shapes: a `(b, l)`, B, C `(b, l, n)` → M `(b, l, l)`.
    """
    check_ssd(a, B, C)
    L = torch.exp(segsum(torch.log(a)))  # (b, l, l): lower-triangular, semiseparable
    return L * einsum(C, B, "b i n, b j n -> b i j")


def ssd(x, a, B, C):
    """The scan `h_t = a_t h_{t-1} + B_t x_tᵀ`, `y_t = C_tᵀ h_t` as `y = M x`.

    Shapes: x `(b, l, d)`, a `(b, l)`, B, C `(b, l, n)` → y `(b, l, d)`.
    """
    check_ssd(a, B, C, x)
    return einsum(ssd_matrix(a, B, C), x, "b i j, b j d -> b i d")


TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_triton_scan(u, delta, A, B, C, D, block_d) -> None:
    """The arguments of the Triton scan: those of `selective_scan_ref`, every
    tensor in one of `TRITON_DTYPES` (float64 would be computed in float32 and
    is refused by name), `n` a power of two >= 2 and `block_d` a power of two."""
    check_inputs(u, delta, A, B, C, D)
    for name, value in (
        ("u", u),
        ("delta", delta),
        ("A", A),
        ("B", B),
        ("C", C),
        ("D", D),
    ):
        if value is not None and value.dtype not in TRITON_DTYPES:
            raise TypeError(
                f"the Triton scan takes float32, float16 or bfloat16 tensors; "
                f"{name} is {value.dtype}"
            )
    n = A.shape[1]
    if n < 2 or n & (n - 1):
        raise ValueError(f"the Triton scan needs d_state a power of two >= 2; got {n}")
    check_int(block_d, "block_d", 1)
    if block_d & (block_d - 1):
        raise ValueError(f"block_d must be a power of two; got {block_d}")


_TRITON: dict[bool, object] = {}


def triton_scan(interpret: bool | None = None):
    """A fused selective-scan forward kernel in Triton: `(function, message)`.

    The kernel keeps the state `(BLOCK_D, n)` of a block of channels in registers and
    walks along time, reading `u, Δ, B, C` once and writing `y` once. It is compiled
    on CUDA and interpreted on a CPU (`TRITON_INTERPRET=1` is set before the kernel is
    defined). The function is None, and the message says why, where Triton is missing or
    the process already defined the kernel in the other mode.
    """
    if interpret is None:
        interpret = not torch.cuda.is_available()
    if not isinstance(interpret, bool):
        raise TypeError(f"interpret must be a bool or None; got {interpret!r}")
    if interpret in _TRITON:
        return _TRITON[interpret], "the Triton scan kernel is ready"
    if _TRITON:
        return None, (
            "the Triton scan kernel was defined "
            f"{'compiled' if interpret else 'interpreted'}; restart to change mode"
        )
    if interpret:
        os.environ["TRITON_INTERPRET"] = (
            "1"  # read when @triton.jit decorates the kernel
        )
    try:
        function = _define_triton_scan(interpret)
    except ImportError as error:
        return None, (
            f"Triton is not available ({error}); install lecturelib[triton] "
            "to run the kernel"
        )
    _TRITON[interpret] = function
    mode = "interpreted on the CPU" if interpret else "compiled for CUDA"
    return function, f"the Triton scan kernel is {mode}"


def _define_triton_scan(interpret: bool):
    global triton, tl
    import triton
    import triton.language as tl

    if interpret:
        patch_triton_interpreter()  # Triton 3.5 (torch 2.9) under NumPy >= 2.4

    @triton.jit
    def _scan_forward(
        U, DELTA, A, B, C, Dskip, Y, t, d, N: tl.constexpr, BLOCK_D: tl.constexpr
    ):
        pid_b = tl.program_id(0)
        offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        offs_n = tl.arange(0, N)
        mask_d = offs_d < d
        a = tl.load(
            A + offs_d[:, None] * N + offs_n[None, :], mask=mask_d[:, None], other=0.0
        )  # (BLOCK_D, N)
        skip = tl.load(Dskip + offs_d, mask=mask_d, other=0.0)
        h = tl.zeros([BLOCK_D, N], tl.float32)
        for i in range(0, t):
            row = pid_b * t * d + i * d
            u = tl.load(U + row + offs_d, mask=mask_d, other=0.0).to(tl.float32)
            dt = tl.load(DELTA + row + offs_d, mask=mask_d, other=0.0).to(tl.float32)
            bt = tl.load(B + (pid_b * t + i) * N + offs_n).to(tl.float32)
            ct = tl.load(C + (pid_b * t + i) * N + offs_n).to(tl.float32)
            h = tl.exp(dt[:, None] * a) * h + (dt * u)[:, None] * bt[None, :]
            y = tl.sum(h * ct[None, :], axis=1) + skip * u
            tl.store(Y + row + offs_d, y, mask=mask_d)

    def scan_triton(u, delta, A, B, C, D=None, block_d: int = 16):
        """The selective scan forward, fused (no `z` gate; fp32 state).

        Shapes: as `selective_scan_ref`; `n` a power of two >= 2; inputs in
        float32, float16 or bfloat16 (computed in float32, returned in u's dtype).
        """
        check_triton_scan(u, delta, A, B, C, D, block_d)
        b, t, d = u.shape
        n = A.shape[1]
        if t == 0:
            return u.new_zeros(b, 0, d)
        D = torch.zeros(d, device=u.device) if D is None else D
        args = [v.contiguous().float() for v in (u, delta, A, B, C, D)]
        y = torch.empty(b, t, d, device=u.device, dtype=torch.float32)
        _scan_forward[(b, math.ceil(d / block_d))](*args, y, t, d, N=n, BLOCK_D=block_d)
        return y.to(u.dtype)

    return scan_triton
