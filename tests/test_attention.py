"""lecturelib.attention: scores, masked softmax, weighted sums, the attention decoder."""

from __future__ import annotations

import pytest
import torch

from lecturelib import attention, seq2seq, train
from lecturelib import translation as tr
from lecturelib.translation import PAD_ID

from translation_helpers import V_SRC, V_TGT, toy_batch  # noqa: E402


def qkv(b=2, t=3, s=5, d=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(b, t, d, generator=gen), torch.randn(b, s, d, generator=gen),
            torch.randn(b, s, 6, generator=gen))


SCORES = [attention.DotScore(), attention.BilinearScore(4, 4), attention.AdditiveScore(4, 4, 8)]


@pytest.mark.parametrize("score", SCORES, ids=lambda m: type(m).__name__)
def test_shapes_for_any_number_of_keys(score):
    for s in (1, 2, 7):  # one module, any number of keys
        q, k, v = qkv(s=s)
        context, weights = attention.lookup(q, k, v, score)
        assert context.shape == (2, 3, 6) and weights.shape == (2, 3, s)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))


def test_score_known_answers():
    q, k, _ = qkv()
    dot = attention.DotScore()(q, k)
    torch.testing.assert_close(dot[1, 2, 3], q[1, 2] @ k[1, 3])
    bilinear = attention.BilinearScore(4, 4)
    with torch.no_grad():
        bilinear.W.copy_(torch.eye(4))
    torch.testing.assert_close(bilinear(q, k), dot)  # W = I is the dot product
    add = attention.AdditiveScore(4, 4, 8)
    by_hand = add.u.weight[0] @ torch.tanh(add.W1.weight @ k[1, 3] + add.W2(q[1, 2]))
    torch.testing.assert_close(add(q, k)[1, 2, 3], by_hand)


def test_one_key_gets_weight_one():
    q, k, v = qkv(s=1)
    for score in SCORES:
        context, weights = attention.lookup(q, k, v, score)
        assert torch.equal(weights, torch.ones(2, 3, 1))
        torch.testing.assert_close(context, v.expand(2, 3, 6))


def test_identical_keys_get_uniform_weights():
    q, k, v = qkv()
    k = k[:, :1].expand(-1, 5, -1)
    for score in SCORES:
        context, weights = attention.lookup(q, k, v, score)
        torch.testing.assert_close(weights, torch.full((2, 3, 5), 0.2))
        torch.testing.assert_close(context, v.mean(1, keepdim=True).expand(2, 3, 6))


def test_padded_keys_get_exactly_zero_weight():
    q, k, v = qkv()
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])
    context, weights = attention.lookup(q, k, v, SCORES[2], mask)
    assert (weights[0, :, 3:] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))
    v2 = v.clone()
    v2[0, 3:] = 1e6  # whatever sits at padded positions cannot leak in
    assert torch.equal(attention.lookup(q, k, v2, SCORES[2], mask)[0], context)


def test_weighted_sum_equals_explicit_loop():
    q, k, v = qkv()
    scores = attention.DotScore()(q, k)
    context, weights = attention.attend(scores, v)
    for b in range(2):
        for t in range(3):
            alpha = torch.exp(scores[b, t]) / torch.exp(scores[b, t]).sum()
            loop = sum(alpha[i] * v[b, i] for i in range(5))
            torch.testing.assert_close(weights[b, t], alpha)
            torch.testing.assert_close(context[b, t], loop)


@pytest.mark.parametrize("score", SCORES, ids=lambda m: type(m).__name__)
def test_permuting_the_keys_changes_nothing(score):
    q, k, v = qkv()
    mask = torch.tensor([[True, True, False, True, True], [True] * 5])
    perm = torch.tensor([4, 2, 0, 3, 1])
    context, weights = attention.lookup(q, k, v, score, mask)
    context_p, weights_p = attention.lookup(q, k[:, perm], v[:, perm], score, mask[:, perm])
    torch.testing.assert_close(context_p, context)
    torch.testing.assert_close(weights_p, weights[:, :, perm])


def test_bad_input_raises():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"queries must be \(b, t, d_q\)"):
        attention.DotScore()(q[0], k)
    with pytest.raises(ValueError, match="needs d_q == d_k"):
        attention.DotScore()(q, k[..., :3])
    with pytest.raises(ValueError, match="expected d_q=4, d_k=4"):
        attention.BilinearScore(4, 4)(q, k[..., :3])
    with pytest.raises(ValueError, match=r"scores must be \(b, t, s\)"):
        attention.attend(torch.zeros(2, 3, 4), v)
    with pytest.raises(ValueError, match=r"mask must be \(b, s\)"):
        attention.attend(torch.zeros(2, 3, 5), v, torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be bool"):
        attention.masked_softmax(torch.zeros(2, 5), torch.ones(2, 5))
    with pytest.raises(ValueError, match="at least one key"):
        attention.masked_softmax(torch.zeros(2, 5), torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="score must be one of"):
        attention.make_score("cosine", 4, 4)
    with pytest.raises(ValueError, match="d_q == d_k"):
        attention.make_score("dot", 4, 8)


def tiny_model(score="additive", seed=0):
    torch.manual_seed(seed)
    return attention.make_model(V_SRC, V_TGT, d_emb=8, d_model=16, score=score)


@pytest.mark.parametrize("score", attention.SCORES[1:])
def test_decoder_shapes_and_weights(score):
    model = tiny_model(score)
    b = toy_batch()
    enc = model.encoder(b.src, b.src_len)
    logits, h, weights = model.decoder(b.tgt_in, enc)
    assert logits.shape == (3, 7, V_TGT) and h.shape == (1, 3, 16)
    assert weights.shape == (3, 7, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 7))
    assert (weights.masked_select(~b.src_mask[:, None, :]) == 0).all()


def test_dot_score_needs_matching_widths():
    with pytest.raises(ValueError, match="d_q == d_k"):
        tiny_model("dot")  # decoder width 16, bidirectional encoder states 32
    enc = seq2seq.Encoder(V_SRC, 8, 16, bidirectional=False)
    dec = attention.AttentionDecoder(V_TGT, 8, 16, enc.d_enc, score="dot")
    b = toy_batch()
    assert dec(b.tgt_in, enc(b.src, b.src_len))[0].shape == (3, 7, V_TGT)


def test_teacher_forcing_in_one_call_equals_step_by_step():
    model = tiny_model()
    b = toy_batch()
    enc = model.encoder(b.src, b.src_len)
    logits, _, weights = model.decoder(b.tgt_in, enc)
    h, steps = None, []
    for t in range(b.tgt_in.shape[1]):
        step_logits, h, w = model.decoder(b.tgt_in[:, t:t + 1], enc, h)
        steps.append((step_logits, w))
    torch.testing.assert_close(logits, torch.cat([s for s, _ in steps], 1))
    torch.testing.assert_close(weights, torch.cat([w for _, w in steps], 1))


def test_padded_loss_equals_unpadded_loss():
    model = tiny_model()
    b = toy_batch()
    total, count = 0.0, 0
    for i, (n_src, n_tgt) in enumerate(zip(b.src_len.tolist(), b.tgt_mask.sum(1).tolist())):
        one = tr.Batch(b.src[i:i + 1, :n_src], b.src_len[i:i + 1], b.tgt_in[i:i + 1, :n_tgt],
                       b.tgt_out[i:i + 1, :n_tgt])
        total += seq2seq.loss(model, one) * n_tgt
        count += n_tgt
    torch.testing.assert_close(seq2seq.loss(model, b), total / count)


def test_one_batch_overfit_and_greedy_attention_weights():
    model = tiny_model()
    b = toy_batch()
    hist = train.fit(model, lambda s: tuple(b), seq2seq.loss, steps=80, lr=3e-2,
                     progress=False)
    assert hist.train_loss[-1] < 0.05
    ids, weights = seq2seq.greedy_decode(model.eval(), b.src, b.src_len, max_len=10)
    assert weights.shape == (3, ids.shape[1], 5)
    for i, n in enumerate(b.tgt_mask.sum(1).tolist()):
        assert ids[i, :n].tolist() == b.tgt_out[i, :n].tolist()
        assert (ids[i, n:] == PAD_ID).all()


# ----------------------------------------------------------------- chapter 6: self-attention
def test_scaled_dot_product_equals_torch_sdpa_with_and_without_mask():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=gen) for _ in range(3))
    ours, weights = attention.scaled_dot_product(q, k, v)
    torch.testing.assert_close(ours, torch.nn.functional.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    causal = attention.causal_mask(5)
    ours, weights = attention.scaled_dot_product(q, k, v, causal)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, ref)
    assert torch.all(weights.triu(1) == 0)


def test_causal_mask_known_answer_and_offset():
    assert attention.causal_mask(3).tolist() == [[True, False, False], [True, True, False],
                                                 [True, True, True]]
    assert attention.causal_mask(1, 4).tolist() == [[True] * 4]  # the newest query sees all
    with pytest.raises(ValueError, match="t <= s"):
        attention.causal_mask(4, 2)


def test_padding_mask_and_bias():
    mask = attention.padding_mask(torch.tensor([2, 4]))
    assert mask.tolist() == [[True, True, False, False], [True] * 4]
    q, k, v = torch.randn(2, 1, 4), torch.randn(2, 4, 4), torch.randn(2, 4, 3)
    _, weights = attention.scaled_dot_product(q, k, v, mask[:, None, :])
    assert torch.all(weights[0, 0, 2:] == 0)
    # a bias of -inf on a key is the same as masking it
    bias = torch.zeros(2, 1, 4).masked_fill(~mask[:, None, :], float("-inf"))
    torch.testing.assert_close(attention.scaled_dot_product(q, k, v, bias=bias)[1], weights)
    with pytest.raises(ValueError, match="1-d integer"):
        attention.padding_mask(torch.tensor([[2.0]]))


def test_multi_head_equals_torch_multihead_attention():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    ours = attention.from_torch(ref)
    x, ctx = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    for context, mask in ((None, None), (None, attention.causal_mask(5)), (ctx, None)):
        kv = x if context is None else context
        expected, w_ref = ref(x, kv, kv, attn_mask=None if mask is None else ~mask,
                              average_attn_weights=False)
        out, weights = ours(x, context, mask)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(weights, w_ref)
    assert train.count_parameters(ours) == train.count_parameters(ref) == 4 * 16 * 16 + 4 * 16


def test_multi_head_is_permutation_equivariant_and_checks_input():
    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(8, 2)
    x, perm = torch.randn(1, 6, 8), torch.randperm(6)
    torch.testing.assert_close(mha(x[:, perm])[0], mha(x)[0][:, perm])
    with pytest.raises(ValueError, match="divisible"):
        attention.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"\(b, t, 8\)"):
        mha(torch.randn(1, 6, 4))


def test_multi_head_attention_overfits_one_batch():
    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(8, 2)
    x, target = torch.randn(4, 5, 8), torch.randn(4, 5, 8)
    opt = torch.optim.Adam(mha.parameters(), lr=1e-2)
    for _ in range(300):
        loss = (mha(x)[0] - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1 * target.pow(2).mean().item()


def test_order_mask_is_the_causal_mask_of_the_permuted_sequence():
    assert torch.equal(attention.order_mask(torch.arange(5)), attention.causal_mask(5))
    order = torch.tensor([2, 0, 3, 1])            # position 2 first, then 0, 3, 1
    mask = attention.order_mask(order)
    assert mask[2].tolist() == [False, False, True, False]   # the first sees only itself
    assert mask[1].all()                                      # the last sees everything
    torch.manual_seed(0)
    mha, x = attention.MultiHeadAttention(8, 2), torch.randn(2, 4, 8)
    rank = order.argsort()
    causal_on_permuted = mha(x[:, order], mask=attention.causal_mask(4))[0]
    torch.testing.assert_close(mha(x, mask=mask)[0], causal_on_permuted[:, rank])
    with pytest.raises(ValueError, match="permutation"):
        attention.order_mask(torch.tensor([0, 0, 1]))


def test_per_head_attention_equals_torch_sdpa_and_heads_cost_no_parameters():
    torch.manual_seed(0)
    mha, x = attention.MultiHeadAttention(16, 4), torch.randn(2, 6, 16)
    q, k, v = (mha.split(lin(x)) for lin in (mha.W_q, mha.W_k, mha.W_v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for causal in (False, True):
        heads = sdpa(q, k, v, is_causal=causal)
        mask = attention.causal_mask(6) if causal else None
        torch.testing.assert_close(attention.scaled_dot_product(q, k, v, mask)[0], heads)
        concat = heads.transpose(1, 2).flatten(2)                 # (b, t, h·d_h)
        torch.testing.assert_close(mha(x, mask=mask)[0], mha.W_o(concat))
    one = attention.MultiHeadAttention(16, 1)
    assert train.count_parameters(one) == train.count_parameters(mha) == 4 * (16 * 16 + 16)


def test_padding_mask_matches_torch_key_padding_mask_and_the_unpadded_sequence():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ours, x = attention.from_torch(ref), torch.randn(2, 5, 8)
    keep = attention.padding_mask(torch.tensor([3, 5]))
    expected = ref(x, x, x, key_padding_mask=~keep)[0]
    out = ours(x, mask=keep[:, None, None, :])[0]
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out[0, :3], ours(x[:1, :3])[0][0])  # padding changes nothing


def test_self_attention_is_linear_in_the_values_and_stays_in_their_hull():
    gen = torch.Generator().manual_seed(0)
    q, k, v1, v2 = (torch.randn(2, 4, 3, generator=gen) for _ in range(4))
    mix = attention.scaled_dot_product(q, k, 2 * v1 - 3 * v2)[0]
    parts = [attention.scaled_dot_product(q, k, v)[0] for v in (v1, v2)]
    torch.testing.assert_close(mix, 2 * parts[0] - 3 * parts[1])
    out = parts[0]                                  # a convex combination of the values
    assert (out <= v1.amax(1, keepdim=True) + 1e-6).all()
    assert (out >= v1.amin(1, keepdim=True) - 1e-6).all()


def test_dot_product_statistics_variance_and_saturation():
    small = attention.dot_product_statistics(16, scaled=False, n=400)
    large = attention.dot_product_statistics(1024, scaled=False, n=400)
    assert abs(large["variance"] / 1024 - 1) < 0.1 and abs(small["variance"] / 16 - 1) < 0.1
    assert large["entropy"] < 0.5 * small["entropy"] and large["saturated"] > 0.5
    assert large["grad_norm"] < 0.1 * small["grad_norm"]
    scaled = [attention.dot_product_statistics(d, scaled=True, n=400) for d in (16, 1024)]
    assert abs(scaled[0]["entropy"] - scaled[1]["entropy"]) < 0.05  # independent of d_k
    assert scaled[1]["saturated"] == 0.0


def test_neighbour_retrieval_known_answer_and_permutation():
    keys, values, targets = attention.neighbour_retrieval(3, 5, n_values=7, seed=1)
    assert keys.shape == values.shape == (3, 5) and targets.shape == (3, 5, 2)
    for b in range(3):
        value_of = dict(zip(keys[b].tolist(), values[b].tolist()))
        for i, key in enumerate(keys[b].tolist()):
            assert targets[b, i].tolist() == [value_of[(key + 1) % 5], value_of[(key - 1) % 5]]
    with pytest.raises(ValueError, match="n_items >= 3"):
        attention.neighbour_retrieval(1, 2)


def test_set_attention_is_permutation_equivariant_and_overfits_one_batch():
    torch.manual_seed(0)
    model = attention.SetAttention(6, 4, d_model=16, n_heads=2)
    keys, values, targets = attention.neighbour_retrieval(8, 6, n_values=4)
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
