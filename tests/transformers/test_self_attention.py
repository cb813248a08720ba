"""lecturelib.transformers.self_attention: scaled dot-product and multi-head attention, masks, the set
task."""

from __future__ import annotations

import pytest
import torch

from lecturelib.transformers import self_attention as sa
from lecturelib import train


def test_scaled_dot_product_equals_torch_sdpa_with_and_without_mask():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=gen) for _ in range(3))
    ours, weights = sa.scaled_dot_product(q, k, v)
    torch.testing.assert_close(ours, torch.nn.functional.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    causal = sa.causal_mask(5)
    ours, weights = sa.scaled_dot_product(q, k, v, causal)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, ref)
    assert torch.all(weights.triu(1) == 0)


def test_causal_mask_known_answer_and_offset():
    assert sa.causal_mask(3).tolist() == [[[True, False, False], [True, True, False],
                                           [True, True, True]]]  # (1, t, s)
    assert sa.causal_mask(1, 4).tolist() == [[[True] * 4]]  # the newest query sees all
    with pytest.raises(ValueError, match="t <= s"):
        sa.causal_mask(4, 2)


def test_padding_mask_and_bias():
    mask = sa.padding_mask(torch.tensor([2, 4]))
    assert mask.tolist() == [[[True, True, False, False]], [[True] * 4]]  # (b, 1, s)
    q, k, v = torch.randn(2, 1, 4), torch.randn(2, 4, 4), torch.randn(2, 4, 3)
    _, weights = sa.scaled_dot_product(q, k, v, mask)
    assert torch.all(weights[0, 0, 2:] == 0)
    # a bias of -inf on a key is the same as masking it
    bias = torch.zeros(2, 1, 4).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(sa.scaled_dot_product(q, k, v, bias=bias)[1], weights)
    with pytest.raises(TypeError, match="1-d integer"):
        sa.padding_mask(torch.tensor([[2.0]]))


def test_multi_head_equals_torch_multihead_attention():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    ours = sa.from_torch(ref)
    x, ctx = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    for context, mask in ((None, None), (None, sa.causal_mask(5)), (ctx, None)):
        kv = x if context is None else context
        expected, w_ref = ref(x, kv, kv, attn_mask=None if mask is None else ~mask[0],
                              average_attn_weights=False)
        out, weights = ours(x, context, mask)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(weights, w_ref)
    assert train.count_parameters(ours) == train.count_parameters(ref) == 4 * 16 * 16 + 4 * 16


def test_multi_head_is_permutation_equivariant_and_checks_input():
    torch.manual_seed(0)
    mha = sa.MultiHeadAttention(8, 2)
    x, perm = torch.randn(1, 6, 8), torch.randperm(6)
    torch.testing.assert_close(mha(x[:, perm])[0], mha(x)[0][:, perm])
    with pytest.raises(ValueError, match="divisible"):
        sa.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"\(b, t, 8\)"):
        mha(torch.randn(1, 6, 4))


def test_multi_head_attention_overfits_one_batch():
    torch.manual_seed(0)
    mha = sa.MultiHeadAttention(8, 2)
    x, target = torch.randn(4, 5, 8), torch.randn(4, 5, 8)
    opt = torch.optim.Adam(mha.parameters(), lr=1e-2)
    for _ in range(300):
        loss = (mha(x)[0] - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1 * target.pow(2).mean().item()


def test_order_mask_is_the_causal_mask_of_the_permuted_sequence():
    assert torch.equal(sa.order_mask(torch.arange(5)), sa.causal_mask(5))
    order = torch.tensor([2, 0, 3, 1])            # position 2 first, then 0, 3, 1
    mask = sa.order_mask(order)
    assert mask.shape == (1, 4, 4)
    assert mask[0, 2].tolist() == [False, False, True, False]  # the first sees only itself
    assert mask[0, 1].all()                                     # the last sees everything
    torch.manual_seed(0)
    mha, x = sa.MultiHeadAttention(8, 2), torch.randn(2, 4, 8)
    rank = order.argsort()
    causal_on_permuted = mha(x[:, order], mask=sa.causal_mask(4))[0]
    torch.testing.assert_close(mha(x, mask=mask)[0], causal_on_permuted[:, rank])
    with pytest.raises(ValueError, match="permutation"):
        sa.order_mask(torch.tensor([0, 0, 1]))


def test_per_head_attention_equals_torch_sdpa_and_heads_cost_no_parameters():
    torch.manual_seed(0)
    mha, x = sa.MultiHeadAttention(16, 4), torch.randn(2, 6, 16)
    q, k, v = mha.project(x)                                      # (b, h, t, d_h)
    for lin, ours in zip((mha.W_q, mha.W_k, mha.W_v), (q, k, v)):  # head i: slice i
        for i in range(4):
            torch.testing.assert_close(ours[:, i], lin(x)[..., 4 * i:4 * (i + 1)])
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for causal in (False, True):
        heads = sdpa(q, k, v, is_causal=causal)
        mask = sa.causal_mask(6) if causal else None
        torch.testing.assert_close(sa.scaled_dot_product(q, k, v, mask)[0], heads)
        concat = heads.transpose(1, 2).flatten(2)                 # (b, t, h·d_h)
        torch.testing.assert_close(mha(x, mask=mask)[0], mha.W_o(concat))
        torch.testing.assert_close(mha.merge_heads(heads), mha.W_o(concat))
    one = sa.MultiHeadAttention(16, 1)
    assert train.count_parameters(one) == train.count_parameters(mha) == 4 * (16 * 16 + 16)


def test_padding_mask_matches_torch_key_padding_mask_and_the_unpadded_sequence():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ours, x = sa.from_torch(ref), torch.randn(2, 5, 8)
    keep = sa.padding_mask(torch.tensor([3, 5]))
    expected = ref(x, x, x, key_padding_mask=~keep[:, 0])[0]
    out = ours(x, mask=keep)[0]
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out[0, :3], ours(x[:1, :3])[0][0])  # padding changes nothing


def test_self_attention_is_linear_in_the_values_and_stays_in_their_hull():
    gen = torch.Generator().manual_seed(0)
    q, k, v1, v2 = (torch.randn(2, 4, 3, generator=gen) for _ in range(4))
    mix = sa.scaled_dot_product(q, k, 2 * v1 - 3 * v2)[0]
    parts = [sa.scaled_dot_product(q, k, v)[0] for v in (v1, v2)]
    torch.testing.assert_close(mix, 2 * parts[0] - 3 * parts[1])
    out = parts[0]                                  # a convex combination of the values
    assert (out <= v1.amax(1, keepdim=True) + 1e-6).all()
    assert (out >= v1.amin(1, keepdim=True) - 1e-6).all()


def test_dot_product_statistics_variance_and_saturation():
    small = sa.dot_product_statistics(16, scaled=False, n=400)
    large = sa.dot_product_statistics(1024, scaled=False, n=400)
    assert abs(large["variance"] / 1024 - 1) < 0.1 and abs(small["variance"] / 16 - 1) < 0.1
    assert large["entropy"] < 0.5 * small["entropy"] and large["saturated"] > 0.5
    assert large["grad_norm"] < 0.1 * small["grad_norm"]
    scaled = [sa.dot_product_statistics(d, scaled=True, n=400) for d in (16, 1024)]
    assert abs(scaled[0]["entropy"] - scaled[1]["entropy"]) < 0.05  # independent of d_k
    assert scaled[1]["saturated"] == 0.0


def test_neighbour_retrieval_known_answer_and_permutation():
    keys, values, targets = sa.neighbour_retrieval(3, 5, n_values=7, seed=1)
    assert keys.shape == values.shape == (3, 5) and targets.shape == (3, 5, 2)
    for b in range(3):
        value_of = dict(zip(keys[b].tolist(), values[b].tolist()))
        for i, key in enumerate(keys[b].tolist()):
            assert targets[b, i].tolist() == [value_of[(key + 1) % 5], value_of[(key - 1) % 5]]
    with pytest.raises(ValueError, match="n_items must be an int >= 3"):
        sa.neighbour_retrieval(1, 2)


def test_set_attention_is_permutation_equivariant_and_overfits_one_batch():
    torch.manual_seed(0)
    model = sa.SetAttention(6, 4, d_model=16, n_heads=2)
    keys, values, targets = sa.neighbour_retrieval(8, 6, n_values=4)
    logits, weights = model(keys, values)
    assert logits.shape == (8, 6, 2, 4) and weights.shape == (8, 2, 6, 6)
    perm = torch.randperm(6)
    torch.testing.assert_close(model(keys[:, perm], values[:, perm])[0], logits[:, perm])

    def loss_fn(m, batch):
        return torch.nn.functional.cross_entropy(m(*batch[:2])[0].flatten(0, 2),
                                                 batch[2].flatten())

    batch = (keys, values, targets)
    hist = train.fit(model, lambda s: batch, loss_fn, steps=150, lr=3e-2, progress=False)
    assert hist.train_loss[-1] < 0.05


def test_padding_mask_with_as_many_sequences_as_queries_masks_keys_not_queries():
    # b == t == 2: a (b, s) mask read as (t, s) would let query 0 of sequence 0 see its pads
    torch.manual_seed(0)
    mha = sa.MultiHeadAttention(8, 2)
    x = torch.randn(2, 2, 8)
    context = torch.randn(2, 5, 8)
    keep = sa.padding_mask(torch.tensor([1, 5]), 5)                 # (b, 1, s)
    _, weights = mha(x, context, mask=keep)
    assert (weights[0, :, :, 1:] == 0).all() and (weights[1] > 0).all()
    alone = mha(x[:1], context[:1, :1])[0]                          # sequence 0, unpadded
    torch.testing.assert_close(mha(x, context, mask=keep)[0][:1], alone)
    with pytest.raises(ValueError, match=r"mask\[:, None, :\]"):
        mha(x, context, mask=keep[:, 0])                            # 2-D: refused


def test_causal_and_padding_masks_combine_with_and():
    causal, keep = sa.causal_mask(4), sa.padding_mask(torch.tensor([2, 4]))
    both = causal & keep
    assert both.shape == (2, 4, 4)
    assert both[0].tolist() == [[True, False, False, False], [True, True, False, False],
                                [True, True, False, False], [True, True, False, False]]
    assert torch.equal(both[1], causal[0])
