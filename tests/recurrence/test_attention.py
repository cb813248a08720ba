"""lecturelib.recurrence.attention: scores, masked softmax, weighted sums, the attention decoder."""

from __future__ import annotations

import pytest
import torch

from lecturelib import train
from lecturelib.recurrence import attention, seq2seq
from lecturelib.recurrence import translation as tr
from lecturelib.recurrence.translation import PAD_ID

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
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])[:, None, :]
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
    mask = torch.tensor([[True, True, False, True, True], [True] * 5])[:, None, :]
    perm = torch.tensor([4, 2, 0, 3, 1])
    context, weights = attention.lookup(q, k, v, score, mask)
    context_p, weights_p = attention.lookup(q, k[:, perm], v[:, perm], score,
                                            mask[..., perm])
    torch.testing.assert_close(context_p, context)
    torch.testing.assert_close(weights_p, weights[:, :, perm])


def tiny_model(score="additive", seed=0):
    torch.manual_seed(seed)
    return attention.make_model(attention.AttentionConfig(
        src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, d_emb=8, d_model=16, score=score))


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
    config = attention.AttentionConfig(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, d_emb=8,
                                       d_model=16, bidirectional=False, score="dot")
    enc, dec = seq2seq.Encoder(config), attention.AttentionDecoder(config)
    assert isinstance(dec.score, attention.DotScore) and enc.d_enc == dec.d_enc == 16
    b = toy_batch()
    assert dec(b.tgt_in, enc(b.src, b.src_len))[0].shape == (3, 7, V_TGT)


def test_config_builds_chapter_4s_encoder_and_the_attention_decoder():
    config = attention.AttentionConfig(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, d_emb=8,
                                       d_model=16, n_layers=2, score="bilinear")
    torch.manual_seed(0)
    model = attention.make_model(config)
    torch.manual_seed(0)
    plain = seq2seq.make_model(seq2seq.Seq2SeqConfig(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT,
                                                     d_emb=8, d_model=16, n_layers=2))
    for (name, p), (_, p_plain) in zip(model.encoder.named_parameters(),
                                       plain.encoder.named_parameters()):
        assert torch.equal(p, p_plain), name        # the same encoder, drawn first
    assert isinstance(model.decoder.score, attention.BilinearScore)
    assert model.decoder.rnn.num_layers == 2 and model.decoder.rnn.hidden_size == 16


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
