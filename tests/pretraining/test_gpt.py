"""lecturelib.pretraining.gpt: the fast GPT equals the plain chapter 6-8 pieces; it is causal and learns."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lecturelib import train
from lecturelib.pretraining import gpt
from lecturelib.recurrence import lm
from lecturelib.transformers import positions, self_attention, transformer


def tiny(**kw) -> gpt.GPTConfig:
    args = {"vocab_size": 11, "seq_len": 16, "d_model": 32, "n_layers": 2, "n_heads": 4}
    args.update(kw)
    return gpt.GPTConfig(**args)


def plain_attention(ours: gpt.CausalSelfAttention, config: gpt.GPTConfig):
    """Chapter 6's MultiHeadAttention with the weights of ``ours``."""
    rotary = positions.Rotary(config.d_head) if config.positions == "rope" else None
    mha = self_attention.MultiHeadAttention(config.d_model, config.n_heads, bias=config.bias,
                                            rotary=rotary)
    with torch.no_grad():
        for i, W in enumerate((mha.W_q, mha.W_k, mha.W_v)):
            W.weight.copy_(ours.qkv.weight.chunk(3)[i])
            if config.bias:
                W.bias.copy_(ours.qkv.bias.chunk(3)[i])
        mha.W_o.load_state_dict(ours.out.state_dict())
    return mha


@pytest.mark.parametrize("pos, bias", [("rope", False), ("learned", True)])
def test_fused_causal_attention_equals_chapter_6_attention(pos, bias):
    torch.manual_seed(0)
    config = tiny(positions=pos, bias=bias)
    ours = gpt.CausalSelfAttention(config)
    x = torch.randn(3, 10, 32)
    mask = self_attention.causal_mask(10)
    expected, _ = plain_attention(ours, config)(x, mask=mask)
    torch.testing.assert_close(ours(x), expected, rtol=1e-5, atol=1e-6)


def test_cached_rope_equals_chapter_7_rope():
    config = tiny()
    attn = gpt.CausalSelfAttention(config)
    x = torch.randn(2, 4, 9, config.d_head)
    angles = positions.rope_angles(9, config.d_head)
    torch.testing.assert_close(attn.rotate(x), positions.rope_rotate(x, angles))


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_block_equals_chapter_8_pre_ln_block(norm):
    torch.manual_seed(0)
    config = tiny(norm=norm, bias=True, positions="learned")
    ours = gpt.Block(config)
    make = transformer.RMSNorm if norm == "rms" else transformer.LayerNorm
    plain = transformer.Block(transformer.StackConfig(d_model=32, n_heads=4, norm_first=True),
                              attn=plain_attention(ours.attn, config), norm=make)
    with torch.no_grad():
        plain.norm1.weight.copy_(ours.norm1.weight)
        plain.norm2.weight.copy_(ours.norm2.weight)
        if norm == "layer":
            plain.norm1.bias.copy_(ours.norm1.bias)
            plain.norm2.bias.copy_(ours.norm2.bias)
        plain.ffn.net[0].load_state_dict(ours.mlp.up.state_dict())
        plain.ffn.net[3].load_state_dict(ours.mlp.down.state_dict())
    x = torch.randn(2, 7, 32)
    torch.testing.assert_close(ours(x), plain(x, mask=self_attention.causal_mask(7)),
                               rtol=1e-5, atol=1e-5)


def test_a_later_token_never_changes_earlier_logits():
    torch.manual_seed(0)
    model = gpt.GPT(tiny()).eval()
    ids = torch.randint(0, 11, (2, 12))
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 11
    a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_shapes_parameters_and_tied_head():
    config = tiny()
    model = gpt.GPT(config)
    assert model(torch.zeros(3, 16, dtype=torch.long)).shape == (3, 16, 11)
    assert model.head.weight is model.embed.weight
    d, L = 32, 2  # 4d² attention + 8d² MLP per layer; RMSNorm gains: 2d per layer + d
    assert gpt.n_params(model) == 12 * L * d * d + 2 * L * d + d
    assert gpt.n_params(model, embeddings=True) == gpt.n_params(model) + 11 * d
    untied = gpt.GPT(tiny(tie_embeddings=False))
    assert gpt.n_params(untied, embeddings=True) == gpt.n_params(model, embeddings=True) + 11 * d
    states = model.residual_stream(torch.zeros(1, 5, dtype=torch.long))
    assert len(states) == 3 and all(s.shape == (1, 5, 32) for s in states)
    torch.testing.assert_close(model.head(model.norm(states[-1])),
                               model(torch.zeros(1, 5, dtype=torch.long)))


def test_residual_projections_start_small():
    model = gpt.GPT(tiny(n_layers=8, d_model=256))
    std = model.blocks[0].attn.out.weight.std().item()
    assert std == pytest.approx(0.02 / 4, rel=0.05)  # 0.02 / √(2·8)
    assert model.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_windows_are_a_function_of_the_step():
    ids = torch.arange(100)
    batches = gpt.windows(ids, 4, 8, seed=1)
    x, y = batches(3)
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y, x + 1)  # the stream is 0, 1, 2, ...: y is x shifted by one token
    assert torch.equal(batches(3)[0], x) and not torch.equal(batches(4)[0], x)
    assert not torch.equal(gpt.windows(ids, 4, 8, seed=2)(3)[0], x)


def test_evaluate_loss_predicts_every_position_once():
    torch.manual_seed(0)
    model = gpt.GPT(tiny())
    ids = torch.randint(0, 11, (50,))
    x, y = ids[:48].view(3, 16), ids[1:49].view(3, 16)
    expected = F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    assert gpt.evaluate_loss(model, ids, 16, batch_size=2) == pytest.approx(expected, rel=1e-6)


def test_overfits_one_batch():
    torch.manual_seed(0)
    model = gpt.GPT(tiny())
    batch = gpt.windows(torch.randint(0, 11, (200,)), 4, 16)(0)
    hist = train.fit(model, [batch], lm.next_token_loss, steps=150, lr=1e-2, progress=False)
    assert hist.train_loss[-1] < 0.1 < 2.0 < hist.train_loss[0]


def test_step_sees_the_last_window_only():
    torch.manual_seed(0)
    model = gpt.GPT(tiny()).eval()
    ids = torch.randint(0, 11, (2, 40))
    torch.testing.assert_close(model.step(ids), model(ids[:, -16:])[:, -1])
