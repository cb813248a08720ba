"""lecturelib.transformers.transformer: every public function and class given bad input raises an error
that names the argument, what was expected and what was given."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lecturelib.recurrence import seq2seq
from lecturelib.transformers import self_attention, transformer, vit

IDS = torch.tensor([[1, 2, 3], [4, 5, 6]])
STACK = transformer.StackConfig(d_model=8, n_heads=2)


def tf_config(**kw):
    return transformer.TransformerConfig(**{"vocab_size": 10, "d_model": 8, "n_heads": 2,
                                            "n_layers": 1, "max_len": 6} | kw)


def vit_config(**kw):
    return vit.ViTConfig(**{"image_size": 8, "patch_size": 2, "n_classes": 3,
                                    "d_model": 8, "n_heads": 2, "n_layers": 1} | kw)


def vit_model():
    torch.manual_seed(0)
    return vit.ViT(vit_config())


def lm():
    torch.manual_seed(0)
    return transformer.TransformerLM(tf_config())


def encoder():
    return transformer.TransformerEncoder(tf_config())


def translator():
    return transformer.make_seq2seq(tf_config(), src_vocab_size=10)


def encoded():
    return encoder()(IDS, torch.tensor([3, 2]))


CASES = [
    # configs: zero and wrong sizes
    (lambda: tf_config(d_model=0), ValueError,
     r"d_model must be an int >= 1; got int 0"),
    (lambda: tf_config(n_heads=0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    (lambda: tf_config(n_layers=-1), ValueError,
     r"n_layers must be an int >= 1; got int -1"),
    (lambda: tf_config(d_ff=0), ValueError,
     r"d_ff must be an int >= 1; got int 0"),
    (lambda: tf_config(vocab_size=0), ValueError,
     r"vocab_size must be an int >= 1; got int 0"),
    (lambda: tf_config(max_len=2.0), ValueError,
     r"max_len must be an int >= 1; got float 2\.0"),
    (lambda: tf_config(n_heads=3), ValueError,
     r"d_model must be divisible by n_heads; got d_model=8, n_heads=3"),
    (lambda: tf_config(dropout=1.5), ValueError,
     r"dropout must be a number in \[0, 1\); got float 1\.5"),
    (lambda: transformer.TransformerConfig(10), TypeError, r"positional"),
    (lambda: transformer.StackConfig(d_model=8, n_heads=0), ValueError,
     r"n_heads must be an int >= 1; got int 0"),
    (lambda: vit_config(patch_size=0), ValueError,
     r"patch_size must be an int >= 1; got int 0"),
    (lambda: vit_config(image_size=0), ValueError,
     r"image_size must be an int >= 1; got int 0"),
    (lambda: vit_config(n_classes=0), ValueError,
     r"n_classes must be an int >= 1; got int 0"),
    # builders given something else than their config
    (lambda: transformer.stack(8), TypeError, r"config must be a StackConfig; got int"),
    (lambda: transformer.make_seq2seq(vit_config(), src_vocab_size=10), TypeError,
     r"config must be a TransformerConfig; got ViTConfig"),
    (lambda: transformer.make_seq2seq(tf_config(), src_vocab_size=0), ValueError,
     r"vocab_size must be an int >= 1; got int 0"),
    (lambda: transformer.TransformerLM(10), TypeError,
     r"config must be a TransformerConfig; got int"),
    (lambda: transformer.TransformerEncoder(vit_config()), TypeError,
     r"config must be a TransformerConfig; got ViTConfig"),
    (lambda: transformer.TransformerDecoder({"vocab_size": 10}), TypeError,
     r"config must be a TransformerConfig; got dict"),
    (lambda: vit.ViT(tf_config()), TypeError,
     r"config must be a ViTConfig; got TransformerConfig"),
    # ids: float, negative, too large, wrong shape, too long
    (lambda: transformer.Embedding(10, 8, 6)(IDS.float()), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch\.float32 tensor of shape \(2, 3\)"),
    (lambda: transformer.Embedding(10, 8, 6)(-IDS), ValueError,
     r"ids must hold token ids in 0\.\.9; got ids from -6 to -1"),
    (lambda: transformer.Embedding(10, 8, 6)(IDS[0]), ValueError,
     r"ids must be 2-D \(b, t\) token ids; got shape \(3,\)"),
    (lambda: transformer.Embedding(10, 8, 2)(IDS), ValueError,
     r"ids must be \(b, t\) with t <= max_len=2; got \(2, 3\)"),
    (lambda: lm()(IDS + 10), ValueError,
     r"ids must hold token ids in 0\.\.9; got ids from 11 to 16"),
    (lambda: lm()(IDS.double()), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch\.float64 tensor of shape \(2, 3\)"),
    (lambda: encoder()(IDS, torch.tensor([3])), ValueError,
     r"src_len must be \(b,\) = \(2,\) integer lengths in 1\.\.3"),
    (lambda: encoder()(IDS, torch.tensor([3, 0])), ValueError, r"src_len must be .*\[3, 0\]"),
    (lambda: encoder()(IDS - 2, torch.tensor([3, 3])), ValueError,
     r"src must hold token ids in 0\.\.9; got ids from -1 to 4"),
    (lambda: encoder()(IDS.float(), torch.tensor([3, 3])), TypeError,
     r"src must be an integer \(long\) tensor of token ids; got torch\.float32 tensor of shape \(2, 3\)"),
    (lambda: translator().decoder(IDS.float(), encoded()), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch\.float32 tensor of shape \(2, 3\)"),
    (lambda: translator()(IDS, torch.tensor([3, 3]), -IDS), ValueError,
     r"ids must hold token ids in 0\.\.9; got ids from -6 to -1"),
    # blocks and masks
    (lambda: transformer.Block(STACK)(torch.randn(2, 3, 8), memory=torch.randn(2, 4, 8)),
     ValueError, r"memory: a block built with cross=True needs memory .*got memory"),
    (lambda: transformer.Block(STACK, cross=True)(torch.randn(2, 3, 8)), ValueError,
     r"memory: .*got none"),
    (lambda: transformer.Block(STACK)(torch.randn(2, 3, 6)), ValueError,
     r"x must be \(b, t, d_model\) with d_model=8; got \(2, 3, 6\)"),
    (lambda: transformer.Block(STACK)(torch.randn(3, 8)), ValueError,
     r"x must be \(b, t, d_model\); got \(3, 8\)"),
    (lambda: transformer.Block(STACK)(torch.randn(2, 3, 8), torch.ones(3, 3, dtype=torch.bool)),
     ValueError, r"mask must be 3-D .*mask\[None\]"),
    (lambda: transformer.Block(STACK)(torch.randn(2, 3, 8), self_attention.causal_mask(4)),
     ValueError, r"mask must be \(b, t, s\) = \(2, 3, 3\).*got \(1, 4, 4\)"),
    (lambda: transformer.Block(transformer.StackConfig(d_model=8, n_heads=3)), ValueError,
     r"StackConfig: d_model must be divisible by n_heads; got d_model=8, n_heads=3"),
    (lambda: transformer.Block(transformer.StackConfig(d_model=8, n_heads=2, d_ff=0)),
     ValueError, r"d_ff must be an int >= 1; got int 0"),
    (lambda: transformer.Block(transformer.StackConfig(d_model=8, n_heads=2, dropout=1.0)),
     ValueError, r"dropout must be a number in \[0, 1\); got float 1\.0"),
    (lambda: transformer.Block(8), TypeError, r"config must be a StackConfig; got int"),
    (lambda: transformer.Block({"d_model": 8, "n_heads": 2}), TypeError,
     r"config must be a StackConfig; got dict"),
    (lambda: transformer.layer_grad_norms([nn.Linear(2, 2)]), TypeError,
     r"blocks must be a non-empty nn.ModuleList; got list"),
    (lambda: transformer.layer_grad_norms(nn.ModuleList([nn.Linear(2, 2)])), ValueError,
     r"blocks: a block has no gradients; call loss.backward\(\) first"),
    (lambda: transformer.LayerNorm(8)(torch.randn(2, 6)), ValueError,
     r"x must be \(\.\.\., d_model\) with d_model=8; got \(2, 6\)"),
    (lambda: transformer.RMSNorm(8)(torch.randn(2, 6)), ValueError, r"d_model=8; got \(2, 6\)"),
    (lambda: transformer.FeedForward(STACK)([1.0] * 8), ValueError, r"d_model=8; got list"),
    (lambda: transformer.FeedForward(8), TypeError, r"config must be a StackConfig; got int"),
    (lambda: transformer.FeedForward(transformer.StackConfig(d_model=0)), ValueError,
     r"d_model must be an int >= 1; got int 0"),
    # images and patches
    (lambda: vit.patchify(torch.rand(1, 1, 8, 8), 0), ValueError,
     r"patch_size must be an int >= 1; got int 0"),
    (lambda: vit.patchify(torch.rand(1, 1, 8, 8), 3), ValueError,
     r"images must be \(b, c, H, W\) with H and W multiples of patch_size=3; got \(1, 1, 8, 8\)"),
    (lambda: vit.patchify(torch.rand(8, 8), 2), ValueError, r"got \(8, 8\)"),
    (lambda: vit.PatchEmbedding(8, 0, 1, 8), ValueError,
     r"patch_size must be an int >= 1; got int 0"),
    (lambda: vit.PatchEmbedding(5, 2, 1, 8), ValueError,
     r"image_size must be a multiple of patch_size; got 5 and 2"),
    (lambda: vit_model()(torch.rand(2, 1, 16, 16)), ValueError,
     r"images must be \(b, c, H, W\) = \(b, 1, 8, 8\) as configured; got \(2, 1, 16, 16\)"),
    (lambda: vit_model()(torch.rand(2, 1, 4, 4)), ValueError, r"= \(b, 1, 8, 8\) .*got \(2, 1, 4, 4\)"),
    (lambda: vit_model()(torch.rand(2, 3, 8, 8)), ValueError, r"= \(b, 1, 8, 8\) .*got \(2, 3, 8, 8\)"),
    (lambda: vit_model()(torch.rand(1, 8, 8)), ValueError, r"as configured; got \(1, 8, 8\)"),
    (lambda: vit_model()(torch.rand(2, 1, 8, 10)), ValueError, r"got \(2, 1, 8, 10\)"),
]


@pytest.mark.parametrize("call,error,message", CASES)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_decoder_given_an_rnn_encoding_of_another_width_fails_by_name():
    rnn_encoded = seq2seq.Encoded(torch.randn(2, 3, 6), torch.ones(2, 3, dtype=torch.bool),
                                  torch.randn(2, 6))
    with pytest.raises(ValueError, match=r"\(b, s, 8\)"):
        translator().decoder(IDS, rnn_encoded)
