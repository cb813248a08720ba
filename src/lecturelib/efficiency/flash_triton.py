"""A FlashAttention forward kernel in Triton (Tillet et al., 2019): one program per
block of `BLOCK_M` queries of one (batch, head), looping over blocks of `BLOCK_N`
keys with the running max and normaliser of
`lecturelib.efficiency.flash.tiled_forward`, all in on-chip memory.

Follows the fused-attention tutorial of Triton and FlashAttention-2 (Dao, 2023,
arXiv:2307.08691): the output is rescaled once at the end, and the causal loop stops at
the diagonal. Forward only; fp32, fp16 or bf16 inputs (bf16 compiled only: Triton's
interpreter computes `tl.dot` of bf16 wrongly, so it is refused there, as is every
other dtype); `t` and `s` multiples of the blocks. It follows
`lecturelib.efficiency.flash.naive_attention` on NaN (NaN in, NaN out) and on
empty inputs (`t = 0`: empty output; `s = 0`: zeros).

Triton compiles the kernel for a CUDA GPU. On a CPU it runs in Triton's interpreter,
which reads `TRITON_INTERPRET=1` when `@triton.jit` decorates the kernel: so the
kernel is defined on the first call of `triton_kernel`, which sets the variable
first on a CPU, and this module imports without Triton.
"""

from __future__ import annotations

import os

import torch

from lecturelib.efficiency import flash
from lecturelib.runtime import patch_triton_interpreter
from lecturelib.validate import check_bool, check_number, check_sizes

_KERNEL: dict[bool, object] = {}


def triton_kernel(interpret: bool | None = None):
    """The FlashAttention forward in Triton: `(function, message)`, the function
    `flash_attention(q, k, v, causal=False, block_q=64, block_k=64)`.

    It is compiled on CUDA and interpreted on a CPU (`TRITON_INTERPRET=1` is set before
    the kernel is defined) unless `interpret` says otherwise. The function is None, and
    the message says why, where Triton is missing or the process already defined the
    kernel in the other mode.
    """
    if interpret is None:
        interpret = not torch.cuda.is_available()
    if not isinstance(interpret, bool):
        raise TypeError(f"interpret must be a bool or None; got {interpret!r}")
    if interpret in _KERNEL:
        return _KERNEL[interpret], "the Triton attention kernel is ready"
    if _KERNEL:
        return None, (
            "the Triton attention kernel was defined "
            f"{'compiled' if interpret else 'interpreted'}; restart the kernel to "
            "change mode"
        )
    if interpret:
        os.environ["TRITON_INTERPRET"] = (
            "1"  # read when @triton.jit decorates the kernel
        )
    try:
        function = _define_flash_attention(interpret)
    except ImportError as error:
        return None, (
            f"Triton is not available ({error}); install lecturelib[triton] "
            "to run the kernel: the Triton cells are skipped"
        )
    _KERNEL[interpret] = function
    mode = "interpreted on the CPU" if interpret else "compiled for CUDA"
    return function, f"Triton {triton.__version__}, kernel {mode}"


def _define_flash_attention(interpret: bool):
    global triton, tl
    import triton
    import triton.language as tl

    if interpret:
        patch_triton_interpreter()  # Triton 3.5 (torch 2.9) under NumPy >= 2.4

    @triton.jit
    def _flash_forward(
        Q,
        K,
        V,
        O,
        scale,
        t,
        s,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        D: tl.constexpr,
        CAUSAL: tl.constexpr,
    ):
        start_m = tl.program_id(0)
        bh = tl.program_id(1)
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, D)
        q = tl.load(Q + bh * t * D + offs_m[:, None] * D + offs_d[None, :])  # (M, D)
        m = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        end = s
        if CAUSAL:
            end = tl.minimum(s, (start_m + 1) * BLOCK_M + s - t)
        for j in range(0, end, BLOCK_N):
            cols = j + offs_n
            k = tl.load(K + bh * s * D + cols[:, None] * D + offs_d[None, :])  # (N, D)
            v = tl.load(V + bh * s * D + cols[:, None] * D + offs_d[None, :])
            scores = tl.dot(q, tl.trans(k)) * scale  # (M, N)
            if CAUSAL:
                visible = cols[None, :] <= offs_m[:, None] + (s - t)
                scores = tl.where(visible, scores, float("-inf"))
            m_new = tl.maximum(m, tl.max(scores, 1))
            p = tl.exp(scores - m_new[:, None])
            alpha = tl.exp(m - m_new)
            l = l * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        out = acc / l[:, None]
        tl.store(
            O + bh * t * D + offs_m[:, None] * D + offs_d[None, :],
            out.to(O.dtype.element_ty),
        )

    def flash_attention(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool = False,
        block_q: int = 64,
        block_k: int = 64,
    ) -> torch.Tensor:
        """`softmax(q kᵀ/√d) v` by the Triton kernel (compiled on CUDA, interpreted
        on a CPU).

        Shapes: q `(b, h, t, d)`, k, v `(b, h, s, d)` → `(b, h, t, d)`; `d` a
        power of two >= 16, `block_q` divides t and `block_k` divides s; causal
        needs s >= t.
        """
        check_flash_attention(q, k, v, causal, block_q, block_k, interpret)
        b, h, t, d = q.shape
        if t == 0 or k.shape[-2] == 0:  # no query, or no key: 0 (as the reference)
            return torch.zeros_like(q)
        q, k, v = (x.contiguous() for x in (q, k, v))
        out = torch.empty_like(q)
        grid = (t // block_q, b * h)
        _flash_forward[grid](
            q,
            k,
            v,
            out,
            d**-0.5,
            t,
            k.shape[-2],
            BLOCK_M=block_q,
            BLOCK_N=block_k,
            D=d,
            CAUSAL=bool(causal),
        )
        return out

    return flash_attention


def check_flash_attention(q, k, v, causal, block_q, block_k, interpret: bool) -> None:
    """The arguments of the Triton `flash_attention`: `(b, h, t, d)`, `(b, h, s,
    d)` twice, `d` a power of two >= 16, blocks that divide the lengths."""
    flash.check_qkv(q, k, v)
    dtypes = (torch.float32, torch.float16) + (() if interpret else (torch.bfloat16,))
    if q.dtype not in dtypes:
        where = "interpreted on a CPU" if interpret else "compiled"
        raise TypeError(
            f"the Triton attention kernel ({where}) takes q, k, v in "
            f"{', '.join(str(x) for x in dtypes)}; got {q.dtype}"
            + (
                " (Triton's interpreter computes tl.dot of bfloat16 wrongly)"
                if q.dtype == torch.bfloat16
                else ""
            )
        )
    if q.dim() != 4 or v.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"q, k, v must be (b, h, t, d), (b, h, s, d), (b, h, s, d); got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    t, s, d = q.shape[-2], k.shape[-2], q.shape[-1]
    if d < 16 or d & (d - 1):
        raise ValueError(f"d must be a power of two >= 16; got {d}")
    flash.check_blocks(t, s, block_q, block_k)
    if causal and s < t:
        raise ValueError(f"causal attention needs s >= t; got t={t}, s={s}")
    if q.device.type != "cuda" and not interpret:
        raise RuntimeError(
            "the compiled Triton kernel needs CUDA tensors; on a CPU ask "
            "triton_kernel(interpret=True) in a fresh process"
        )


def tflops(
    t: int, d: int, heads: int, batch: int, causal: bool, seconds: float
) -> float:
    """The attention forward's throughput in TFLOP/s (`4 b h t² d`, halved when
    causal)."""
    check_sizes(t=t, d=d, heads=heads, batch=batch)
    check_bool(causal, "causal")
    check_number(seconds, "seconds", 0, low_open=True)
    return 4 * batch * heads * t * t * d * (0.5 if causal else 1.0) / seconds / 1e12
