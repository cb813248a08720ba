"""lecturelib.efficiency.linear_attention: recurrent == parallel, unbiased random features,
masks."""

from __future__ import annotations

import math

import torch

from lecturelib.efficiency import flash
from lecturelib.efficiency import linear_attention as la


def qkv(t=12, s=12, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(2, 3, t, d, generator=g, dtype=torch.float64),
        torch.randn(2, 3, s, d, generator=g, dtype=torch.float64),
        torch.randn(2, 3, s, 5, generator=g, dtype=torch.float64),
    )


def test_causal_recurrent_equals_parallel():
    q, k, v = qkv()
    torch.testing.assert_close(
        la.linear_attention(q, k, v, causal=True),
        la.linear_attention_recurrent(q, k, v),
    )


def test_linear_attention_equals_its_quadratic_form():
    q, k, v = qkv(t=7, s=12)
    fq, fk = la.elu_feature(q), la.elu_feature(k)
    weights = fq @ fk.transpose(-2, -1)
    expected = weights @ v / weights.sum(-1, keepdim=True)
    torch.testing.assert_close(la.linear_attention(q, k, v), expected)
    q, k, v = qkv()
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    weights = (la.elu_feature(q) @ la.elu_feature(k).transpose(-2, -1)) * causal
    torch.testing.assert_close(
        la.linear_attention(q, k, v, causal=True),
        weights @ v / weights.sum(-1, keepdim=True),
    )


def test_performer_estimate_is_unbiased():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, generator=g, dtype=torch.float64) * 0.5
    draws = torch.stack(
        [
            la.performer_features(q[None], la.random_features(4, 1, seed=i))
            * la.performer_features(k[None], la.random_features(4, 1, seed=i))
            for i in range(20000)
        ]
    ).flatten()
    exact = math.exp((q @ k).item())
    assert abs(draws.mean().item() - exact) < 4 * draws.std().item() / math.sqrt(20000)


def test_performer_approaches_softmax_with_many_features():
    q, k, v = qkv(d=4)
    q, k = q * 0.5, k * 0.5
    exact = flash.naive_attention(q, k, v)
    errors = [
        (la.performer_attention(q, k, v, la.random_features(4, m)) - exact).abs().mean()
        for m in (4, 4096)
    ]
    assert errors[1] < errors[0] / 4


def test_linformer_with_identity_is_softmax():
    q, k, v = qkv()
    torch.testing.assert_close(
        la.linformer_attention(q, k, v, torch.eye(12)), flash.naive_attention(q, k, v)
    )


def test_masks():
    w = la.sliding_window_mask(6, 2)
    assert w.sum() == 6 + 5 and w.diagonal().all() and not w.triu(1).any()
    assert la.sliding_window_mask(6, 2, causal=False).sum() == 6 + 2 * 5
    b = la.bigbird_mask(16, 2, 1, 2)
    assert b[0].all() and b[:, 0].all() and (b.sum(-1) >= 3).all()
    assert torch.equal(
        b & la.sliding_window_mask(16, 2, False), la.sliding_window_mask(16, 2, False)
    )


def test_recall_model_overfits_one_batch_and_every_variant_runs():
    items, query, target = la.recall_batch(16, 8, 16, 4)
    assert items.shape == (16, 8, 2) and query.shape == target.shape == (16,)
    assert (items[..., 0] == query[:, None]).sum(1).eq(1).all()
    for variant in la.VARIANTS:
        assert la.RecallModel(variant, 8, 16, 4)(items, query).shape == (16, 4)
    torch.manual_seed(0)
    model = la.RecallModel("softmax", 8, 16, 4, d_model=32)
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    for _ in range(150):
        loss = torch.nn.functional.cross_entropy(model(items, query), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
