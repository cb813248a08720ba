"""lecturelib.transformers.transformer: the block against torch.nn.TransformerEncoderLayer/DecoderLayer."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from einops import rearrange

from lecturelib.transformers import self_attention, transformer, vit


def copy_block(ref: nn.Module, cross: bool) -> transformer.Block:
    config = transformer.StackConfig(d_model=16, n_heads=4, d_ff=32, norm_first=ref.norm_first)
    ours = transformer.Block(config, cross=cross)
    ours.attn = self_attention.from_torch(ref.self_attn)
    if cross:
        ours.cross = self_attention.from_torch(ref.multihead_attn)
        ours.norm_cross.load_state_dict(ref.norm2.state_dict())
        ours.norm2.load_state_dict(ref.norm3.state_dict())
    else:
        ours.norm2.load_state_dict(ref.norm2.state_dict())
    ours.norm1.load_state_dict(ref.norm1.state_dict())
    ours.ffn.net[0].load_state_dict(ref.linear1.state_dict())
    ours.ffn.net[3].load_state_dict(ref.linear2.state_dict())
    return ours


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_equals_torch_encoder_layer(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation="gelu",
                                     batch_first=True, norm_first=norm_first).eval()
    ours = copy_block(ref, cross=False)
    x = torch.randn(2, 5, 16)
    mask = self_attention.causal_mask(5)                   # (1, t, t)
    torch.testing.assert_close(ours(x, mask), ref(x, src_mask=~mask[0]))


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_with_cross_attention_equals_torch_decoder_layer(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, activation="gelu",
                                     batch_first=True, norm_first=norm_first).eval()
    ours = copy_block(ref, cross=True)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    mask = self_attention.causal_mask(5)
    torch.testing.assert_close(ours(x, mask, memory=memory),
                               ref(x, memory, tgt_mask=~mask[0]))


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_without_residual_is_the_plain_composition(norm_first):
    torch.manual_seed(0)
    config = transformer.StackConfig(d_model=8, n_heads=2, norm_first=norm_first)
    plain = transformer.Block(replace(config, residual=False)).eval()
    skip = transformer.Block(config).eval()
    skip.load_state_dict(plain.state_dict())                  # the same weights
    x = torch.randn(2, 3, 8)

    def attn(h):
        return plain.attn(h)[0]

    with torch.no_grad():
        if norm_first:  # f(LN(x)) without "+ x"
            a = attn(plain.norm1(x))
            expected = plain.ffn(plain.norm2(a))
            h = x + attn(plain.norm1(x))
            with_skip = h + plain.ffn(plain.norm2(h))
        else:           # LN(f(x)) without "+ x"
            a = plain.norm1(attn(x))
            expected = plain.norm2(plain.ffn(a))
            h = plain.norm1(x + attn(x))
            with_skip = plain.norm2(h + plain.ffn(h))
        torch.testing.assert_close(plain(x), expected)
        torch.testing.assert_close(skip(x), with_skip)
        assert (plain(x) - skip(x)).abs().max() > 0.1


def test_block_and_feed_forward_take_their_sizes_from_the_config():
    config = transformer.StackConfig(d_model=8, n_heads=2, n_layers=3, dropout=0.25)
    ffn = transformer.FeedForward(config, activation=nn.ReLU)
    assert [type(m) for m in ffn.net] == [nn.Linear, nn.ReLU, nn.Dropout, nn.Linear]
    assert ffn.net[0].out_features == 32 and ffn.net[2].p == 0.25     # d_ff=None: 4d
    wide = transformer.FeedForward(transformer.StackConfig(d_model=8, n_heads=2, d_ff=12))
    assert wide.net[0].out_features == 12 and isinstance(wide.net[1], nn.GELU)
    torch.manual_seed(0)
    blocks = transformer.stack(config, cross=True)
    torch.manual_seed(0)
    expected = [transformer.Block(config, cross=True) for _ in range(3)]
    for ours, ref in zip(blocks, expected, strict=True):
        assert ours.state_dict().keys() == ref.state_dict().keys()
        assert all(torch.equal(a, b) for a, b in
                   zip(ours.state_dict().values(), ref.state_dict().values()))
    assert blocks[0].cross is not None and blocks[0].drop.p == 0.25


# --- chapter 8: normalisation, gradient norms, the three architectures, the ViT ---

def test_layer_norm_equals_torch_with_gradients():
    torch.manual_seed(0)
    ours, ref = transformer.LayerNorm(6), nn.LayerNorm(6)
    with torch.no_grad():
        for p, q in zip(ours.parameters(), ref.parameters()):
            p.copy_(torch.randn_like(p))
            q.copy_(p)
    x = 5 * torch.randn(3, 4, 6) + 2
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.testing.assert_close(ours(a), ref(b))
    ours(a).pow(3).sum().backward()
    ref(b).pow(3).sum().backward()
    torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad, atol=1e-4, rtol=1e-4)


def test_rms_norm_equals_torch_and_layer_norm_on_centred_input():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8) + 3
    rms = transformer.RMSNorm(8)
    torch.testing.assert_close(rms(x), nn.RMSNorm(8, eps=rms.eps)(x))
    centred = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(rms(centred), transformer.LayerNorm(8, eps=rms.eps)(centred))
    # known answer: a constant vector c has RMS |c|, so it maps to sign(c)
    torch.testing.assert_close(rms(torch.full((1, 8), -4.0)), -torch.ones(1, 8),
                               atol=1e-5, rtol=0)


def test_block_takes_rms_norm():
    torch.manual_seed(0)
    config = transformer.StackConfig(d_model=8, n_heads=2)
    ln_block = transformer.Block(config).eval()
    rms_block = transformer.Block(config, norm=transformer.RMSNorm).eval()
    rms_block.load_state_dict(ln_block.state_dict(), strict=False)  # all but the β's
    seen = []
    rms_block.attn.register_forward_hook(lambda m, args, out: seen.append(args[0]))
    x = torch.randn(2, 3, 8) + 2                          # features with a non-zero mean
    with torch.no_grad():
        out = rms_block(x)
    h = seen[0]                                            # what attention reads: RMSNorm(x)
    torch.testing.assert_close(h.pow(2).mean(-1), torch.ones(2, 3), atol=1e-4, rtol=0)
    assert h.mean(-1).abs().min() > 0.5                    # scaled, not centred
    with torch.no_grad():
        assert (out - ln_block(x)).abs().max() > 0.1       # LayerNorm would centre


def test_layer_grad_norms_known_answer_and_error():
    blocks = nn.ModuleList([nn.Linear(2, 1, bias=False), nn.Linear(2, 1, bias=False)])
    with pytest.raises(ValueError, match="backward"):
        transformer.layer_grad_norms(blocks)
    x = torch.tensor([[3.0, 4.0]])
    (blocks[0](x) + 2 * blocks[1](x)).sum().backward()   # grads: x and 2x
    torch.testing.assert_close(transformer.layer_grad_norms(blocks), torch.tensor([5.0, 10.0]))


def test_residuals_keep_gradients_in_a_deep_stack():
    torch.manual_seed(0)
    norms = {}
    for residual in (True, False):
        config = transformer.StackConfig(d_model=16, n_heads=2, n_layers=8, residual=residual)
        blocks = nn.ModuleList(transformer.Block(config, norm=lambda d: nn.Identity())
                               for _ in range(config.n_layers)).double()
        h = torch.randn(2, 6, 16, dtype=torch.double)
        for block in blocks:
            h = block(h)
        h.sum().backward()
        g = transformer.layer_grad_norms(blocks)
        norms[residual] = (g[0] / g[-1]).item()
    assert 0.2 < norms[True] < 5 and norms[False] < 1e-2


def test_language_model_is_causal():
    torch.manual_seed(0)
    model = transformer.TransformerLM(transformer.TransformerConfig(
        vocab_size=11, d_model=16, n_heads=2, n_layers=2, max_len=9)).eval()
    ids = torch.randint(0, 11, (2, 9))
    edited = ids.clone()
    edited[:, 5] = (edited[:, 5] + 1) % 11
    with torch.no_grad():
        before, after = model(ids), model(edited)
    assert before.shape == (2, 9, 11)
    torch.testing.assert_close(before[:, :5], after[:, :5], atol=0, rtol=0)
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_post_ln_model_has_no_final_norm_and_normalised_blocks():
    model = transformer.TransformerLM(transformer.TransformerConfig(
        vocab_size=7, d_model=8, n_heads=2, n_layers=2, max_len=4, norm_first=False))
    assert isinstance(model.norm, nn.Identity)
    x = model.embed(torch.randint(0, 7, (1, 4)))
    y = model.blocks[0](x)
    torch.testing.assert_close(y.norm(dim=-1), torch.full((1, 4), 8 ** 0.5), rtol=1e-4,
                               atol=0)


def test_embedding_rejects_sequences_longer_than_its_positions():
    emb = transformer.Embedding(5, 4, max_len=3)
    assert emb(torch.zeros(2, 3, dtype=torch.long)).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="max_len=3"):
        emb(torch.zeros(2, 4, dtype=torch.long))


def test_encoder_sees_everything_and_ignores_padding():
    torch.manual_seed(0)
    enc = transformer.TransformerEncoder(transformer.TransformerConfig(
        vocab_size=10, d_model=16, n_heads=2, n_layers=2)).eval()
    src = torch.randint(4, 10, (1, 6))
    with torch.no_grad():
        alone = enc(src, torch.tensor([6]))
        padded = enc(torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1),
                     torch.tensor([6]))
        edited = src.clone()
        edited[0, 5] = 4 if src[0, 5] != 4 else 5
        changed = enc(edited, torch.tensor([6]))
    torch.testing.assert_close(padded.states[:, :6], alone.states, atol=1e-5, rtol=1e-5)
    assert padded.mask.tolist() == [[True] * 6 + [False] * 3]
    assert not torch.allclose(changed.states[:, 0], alone.states[:, 0])
    with pytest.raises(ValueError, match="src_len"):
        enc(src, torch.tensor([6, 6]))


def tiny_pairs():
    src = torch.tensor([[1, 5, 6, 7, 2], [1, 8, 9, 2, 0]])
    src_len = torch.tensor([5, 4])
    tgt_in = torch.tensor([[1, 6, 5, 4], [1, 9, 9, 8]])
    tgt_out = torch.tensor([[6, 5, 4, 2], [9, 9, 8, 2]])
    return src, src_len, tgt_in, tgt_out


def test_decoder_step_by_step_equals_teacher_forcing_and_is_causal():
    torch.manual_seed(0)
    config = transformer.TransformerConfig(vocab_size=10, d_model=16, n_heads=2, n_layers=2)
    model = transformer.make_seq2seq(config, src_vocab_size=10).eval()
    src, src_len, tgt_in, _ = tiny_pairs()
    with torch.no_grad():
        enc = model.encoder(src, src_len)
        full, prefix, weights = model.decoder(tgt_in, enc)
        h, steps = None, []
        for t in range(tgt_in.shape[1]):
            logits, h, _ = model.decoder(tgt_in[:, t:t + 1], enc, h)
            steps.append(logits)
        edited = tgt_in.clone()
        edited[:, 2] = 3
        changed, _, _ = model.decoder(edited, enc)
    assert full.shape == (2, 4, 10) and weights is None
    assert torch.equal(prefix, tgt_in) and torch.equal(h, tgt_in)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(changed[:, :2], full[:, :2], atol=0, rtol=0)
    assert not torch.allclose(changed[:, 2:], full[:, 2:])


def test_seq2seq_transformer_overfits_a_tiny_batch():
    from lecturelib.recurrence import seq2seq

    torch.manual_seed(0)
    config = transformer.TransformerConfig(vocab_size=10, d_model=32, n_heads=2, n_layers=1)
    model = transformer.make_seq2seq(config, src_vocab_size=10)
    batch = tiny_pairs()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        loss = seq2seq.loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    ids, attn = seq2seq.greedy_decode(model.eval(), batch[0], batch[1], max_len=6)
    assert attn is None
    assert torch.equal(ids[:, :4], batch[3])              # the targets, then </s>


def test_patchify_and_patch_embedding_shapes_and_conv_equals_linear():
    torch.manual_seed(0)
    images = torch.arange(2 * 3 * 4 * 4, dtype=torch.float).reshape(2, 3, 4, 4)
    patches = vit.patchify(images, 2)
    assert patches.shape == (2, 4, 12)
    # known answer: the second patch of image 0 is the top-right 2×2 of every channel
    assert patches[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23, 34, 35, 38, 39]
    emb = vit.PatchEmbedding(4, 2, 3, 8)
    out = emb(images)
    assert out.shape == (2, 5, 8) and emb.n_patches == 4
    weight = emb.proj.weight.reshape(8, 12)
    by_linear = patches @ weight.T + emb.proj.bias + emb.pos[:, 1:]
    torch.testing.assert_close(out[:, 1:], by_linear, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(out[:, 0], (emb.cls + emb.pos[:, :1])[0].expand(2, 8))
    with pytest.raises(ValueError, match="multiple"):
        vit.PatchEmbedding(5, 2, 1, 8)
    with pytest.raises(ValueError, match="patch_size=3"):
        vit.patchify(images, 3)


def permute_patches(images: torch.Tensor, perm: torch.Tensor, p: int) -> torch.Tensor:
    """Move whole P×P patches to other places; the pixels inside each patch stay."""
    patches = rearrange(images, "b c (gh p) (gw q) -> b (gh gw) c p q", p=p, q=p)
    return rearrange(patches[:, perm], "b (gh gw) c p q -> b c (gh p) (gw q)",
                     gh=images.shape[2] // p)


def test_vit_shapes_and_permutation_of_patches_matters_only_through_positions():
    torch.manual_seed(0)
    model = vit.ViT(vit.ViTConfig(image_size=8, patch_size=2, n_classes=10,
                                  d_model=16, n_heads=2, n_layers=1)).eval()
    images = torch.rand(3, 1, 8, 8)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(1))
    moved = permute_patches(images, perm, 2)
    assert torch.equal(vit.patchify(moved, 2), vit.patchify(images, 2)[:, perm])
    with torch.no_grad():
        logits = model(images)
        assert logits.shape == (3, 10)
        assert (logits - model(moved)).abs().max() > 1e-3   # positions tell patches apart
        model.patches.pos.zero_()                            # without position embeddings
        torch.testing.assert_close(model(moved), model(images))   # a set of patches


def test_vit_overfits_a_few_images():
    torch.manual_seed(0)
    model = vit.ViT(vit.ViTConfig(image_size=8, patch_size=2, n_classes=4,
                                  d_model=32, n_heads=4, n_layers=2))
    images, labels = torch.rand(8, 1, 8, 8), torch.tensor([0, 1, 2, 3] * 2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(80):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert torch.equal(model.eval()(images).argmax(-1), labels)
