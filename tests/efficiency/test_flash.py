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


def _paths(q, k, v, causal=False, mask=None, block=2):
    """The reference and the tiled paths on one input."""
    ref = flash.naive_attention(q, k, v, causal, mask)
    out, _ = flash.tiled_forward(q, k, v, causal, mask, None, block, block)
    return ref, out, flash.tiled_attention(q, k, v, causal, mask, None, block, block)


def test_nan_in_gives_nan_out_on_every_path():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    k[..., 2, :] = float("nan")  # one key: every query attends it
    for out in _paths(q, k, v):
        assert out.isnan().all()
    k[:] = float("nan")  # every key
    for out in _paths(q, k, v):
        assert out.isnan().all()
    k = torch.randn(1, 2, 6, 8)
    q[..., 1, :] = float("nan")  # one query: its row only
    for out in _paths(q, k, v):
        assert out[..., 1, :].isnan().all() and not out[..., [0, 2, 3], :].isnan().any()


def test_a_hidden_nan_key_and_a_fully_masked_row_agree_on_every_path():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 1, 4, 8), torch.randn(1, 1, 6, 8), torch.randn(1, 1, 6, 8)
    k[..., 3, :] = float("nan")
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[:, 3] = False  # the NaN key is hidden from every query
    mask[1] = False  # query 1 sees no key: output 0
    ref, *fast = _paths(q, k, v, mask=mask)
    assert not ref.isnan().any() and ref[..., 1, :].eq(0).all()
    for out in fast:
        torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("t, s", [(0, 6), (4, 0), (0, 0)])
def test_empty_queries_or_keys_agree_on_every_path(t, s):
    q = torch.randn(1, 2, t, 8, requires_grad=True)
    k, v = torch.randn(1, 2, s, 8), torch.randn(1, 2, s, 8)
    ref, *fast = _paths(q, k, v)
    assert ref.shape == (1, 2, t, 8) and ref.eq(0).all()  # no key: 0
    for out in fast:
        torch.testing.assert_close(out, ref, atol=0, rtol=0)
    fast[-1].sum().backward()
    assert q.grad.shape == q.shape and q.grad.eq(0).all()


def test_causal_queries_before_the_first_key_get_zero_with_finite_gradients():
    torch.manual_seed(0)
    q = torch.randn(1, 1, 6, 8, requires_grad=True)
    k, v = torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)
    ref, _, fast = _paths(q, k, v, causal=True)
    assert ref[..., :2, :].eq(0).all()
    torch.testing.assert_close(fast, ref)
    g_ref, g_fast = (torch.autograd.grad(x.sum(), q)[0] for x in (ref, fast))
    assert g_ref.isfinite().all()
    torch.testing.assert_close(g_fast, g_ref)


def test_attention_flops_total_flash_does_more_work_and_moves_fewer_bytes():
    # t=4, d=2: QKᵀ and PV 2·32 each, softmax 5·16; tiled rescaling 4·2·(2·2+5)
    assert flash.attention_flops_total(4, 2) == 2 * 64 + 80
    assert flash.attention_flops_total(4, 2, block=2) == 208 + 72
    # naive backward: 4·64 + 2·16 + 2·8; flash adds the recomputation 64 + 80
    assert flash.attention_flops_total(4, 2, backward=True) == 208 + 304
    assert flash.attention_flops_total(4, 2, 2, True) == 280 + 304 + 144
    sram, d = 192 * 1024 // 4, 64
    ratios = []
    for t in (256, 512, 1024, 2048, 4096, 8192, 16384):
        naive = flash.attention_flops_total(t, d, backward=True)
        for block in (1, 64, t):
            assert flash.attention_flops_total(t, d, block, backward=True) > naive
        io = flash.io_bytes(t, d, sram)
        ratios.append(io["standard"] / io["flash"])
    limit = 2 * (sram // (4 * d)) / d  # (4t²) / (2td · t / B) as t grows
    assert all(a < b for a, b in zip(ratios, ratios[1:]))
    assert 1 < ratios[0] and ratios[-1] <= limit and ratios[-1] > 0.95 * limit
