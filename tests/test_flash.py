"""lecturelib.efficiency.flash: online softmax and tiled attention against their plain
references."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib.efficiency import flash


def qkv(b=2, h=3, t=16, s=16, d=8, d_v=None, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, t, d, generator=g, dtype=dtype),
        torch.randn(b, h, s, d, generator=g, dtype=dtype),
        torch.randn(b, h, s, d_v or d, generator=g, dtype=dtype),
    )


def test_softmaxes_equal_torch():
    x = torch.randn(4, 5, 24, dtype=torch.float64) * 30  # large: needs the max
    for block in (1, 3, 8, 24):
        torch.testing.assert_close(flash.online_softmax(x, block), torch.softmax(x, -1))
    torch.testing.assert_close(flash.safe_softmax(x), torch.softmax(x, -1))


def test_safe_softmax_does_not_overflow():
    x = torch.tensor([1000.0, 1000.0])
    assert torch.isnan(torch.exp(x) / torch.exp(x).sum()).all()
    torch.testing.assert_close(flash.safe_softmax(x), torch.tensor([0.5, 0.5]))


def test_naive_equals_sdpa():
    q, k, v = qkv()
    for causal in (False, True):
        torch.testing.assert_close(
            flash.naive_attention(q, k, v, causal),
            F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        )


@settings(max_examples=40, deadline=None)
@given(
    t_blocks=st.integers(1, 4),
    s_blocks=st.integers(1, 4),
    bq=st.sampled_from([1, 2, 4, 8]),
    bk=st.sampled_from([1, 3, 4, 8]),
    d=st.integers(1, 9),
    causal=st.booleans(),
    masked=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_tiled_equals_naive(t_blocks, s_blocks, bq, bk, d, causal, masked, seed):
    t, s = t_blocks * bq, s_blocks * bk
    q, k, v = qkv(2, 2, t, s, d, d_v=3, seed=seed)
    mask = None
    if masked:
        mask = (
            torch.rand(2, 1, t, s, generator=torch.Generator().manual_seed(seed)) > 0.5
        )
    expected = flash.naive_attention(q, k, v, causal, mask)
    out, lse = flash.tiled_forward(q, k, v, causal, mask, block_q=bq, block_k=bk)
    torch.testing.assert_close(out, expected)
    assert out.shape == (2, 2, t, 3) and lse.shape == (2, 2, t)


def test_lse_is_the_log_normaliser():
    q, k, v = qkv()
    _, lse = flash.tiled_forward(q, k, v, block_q=4, block_k=8)
    expected = torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    torch.testing.assert_close(lse, expected)


@pytest.mark.parametrize(
    "causal, masked, t, s",
    [
        (False, False, 16, 16),
        (True, False, 16, 16),
        (True, True, 8, 16),
        (False, True, 16, 8),
    ],
)
def test_recomputing_backward_equals_autograd(causal, masked, t, s):
    q, k, v = qkv(t=t, s=s)
    mask = (
        torch.rand(1, 1, t, s, generator=torch.Generator().manual_seed(1)) > 0.3
        if masked
        else None
    )
    grad = torch.randn(2, 3, t, 8, dtype=torch.float64)
    grads = []
    for fn in (
        flash.naive_attention,
        lambda *a: flash.tiled_attention(*a, block_q=4, block_k=8),
    ):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        grads.append(
            torch.autograd.grad((fn(*leaves, causal, mask) * grad).sum(), leaves)
        )
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_gradcheck():
    q, k, v = (x.requires_grad_() for x in qkv(1, 1, 8, 8, 4))
    assert torch.autograd.gradcheck(
        lambda q, k, v: flash.tiled_attention(q, k, v, True, block_q=2, block_k=4),
        (q, k, v),
    )


def test_float32_and_long_rows_agree_with_sdpa():
    q, k, v = qkv(1, 2, 256, 256, 32, dtype=torch.float32)
    out, _ = flash.tiled_forward(q, k, v, True, block_q=64, block_k=128)
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        atol=1e-5,
        rtol=1e-4,
    )


def test_flops_and_io():
    assert flash.attention_flops(8, 4, 2) == 4 * 2 * 64 * 4
    assert flash.attention_flops(8, 4, causal=True) == 2 * 64 * 4
    io = flash.io_bytes(4096, 64, 25_000)
    assert io["flash"] < io["standard"]
    small, big = flash.io_bytes(4096, 64, 1024), flash.io_bytes(4096, 64, 65536)
    assert big["flash"] < small["flash"]  # a larger SRAM reads K and V fewer times
