"""A FlashAttention forward kernel in Triton (Tillet et al., 2019): one program per
block of ``BLOCK_M`` queries of one (batch, head), looping over blocks of ``BLOCK_N``
keys with the running max and normaliser of :func:`lecturelib.efficiency.flash.tiled_forward`, all
in on-chip memory.

Follows the fused-attention tutorial of Triton and FlashAttention-2 (Dao, 2023,
arXiv:2307.08691): the output is rescaled once at the end, and the causal loop stops at
the diagonal. Forward only; fp32, fp16 or bf16 inputs; ``t`` and ``s`` multiples of the
blocks.

Triton compiles the kernel for a CUDA GPU. On a CPU it runs in Triton's interpreter,
which reads ``TRITON_INTERPRET=1`` when ``@triton.jit`` decorates the kernel, i.e. when
this module is first imported: set it before the import (as
:func:`lecturelib.efficiency.flash.triton_kernel` does).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


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
    """``softmax(q kᵀ/√d) v`` by the Triton kernel (compiled on CUDA, interpreted on CPU
    with ``TRITON_INTERPRET=1``).

    Shapes: q ``(b, h, t, d)``, k, v ``(b, h, s, d)`` → ``(b, h, t, d)``; ``d`` a power
    of two >= 16, ``block_q`` divides t and ``block_k`` divides s; causal needs s >= t.
    """
    from lecturelib.efficiency import flash

    flash._check_qkv(q, k, v)
    if q.dim() != 4 or v.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"q, k, v must be (b, h, t, d), (b, h, s, d), (b, h, s, d); got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    b, h, t, d = q.shape
    s = k.shape[-2]
    if d < 16 or d & (d - 1):
        raise ValueError(f"d must be a power of two >= 16; got {d}")
    flash._check_blocks(t, s, block_q, block_k)
    if causal and s < t:
        raise ValueError(f"causal attention needs s >= t; got t={t}, s={s}")
    if q.device.type != "cuda" and not INTERPRETED:
        raise RuntimeError(
            "the Triton kernel needs a CUDA tensor, or TRITON_INTERPRET=1 set "
            "before lecturelib.efficiency.flash_triton is imported to run on the CPU"
        )
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
        s,
        BLOCK_M=block_q,
        BLOCK_N=block_k,
        D=d,
        CAUSAL=bool(causal),
    )
    return out


def tflops(
    t: int, d: int, heads: int, batch: int, causal: bool, seconds: float
) -> float:
    """The attention forward's throughput in TFLOP/s (``4 b h t² d``, halved when
    causal)."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0; got {seconds!r}")
    return 4 * batch * heads * t * t * d * (0.5 if causal else 1.0) / seconds / 1e12
