"""lecturelib.transformers.positional_lm: the Pre-LN block, the position-scheme language model and its loss
at each position."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.transformers import positional_lm as plm
from lecturelib.transformers import positions, self_attention, transformer


def test_pre_ln_block_equals_the_transformer_block_with_the_same_weights():
    torch.manual_seed(0)
    ours = plm.PreLNBlock(8, positions.RelativeAttention(8, 2, 3))
    torch.manual_seed(0)                  # the same draws in the same order: the same weights
    ref = transformer.Block(8, 2, attn=positions.RelativeAttention(8, 2, 3))
    x, mask = torch.randn(2, 6, 8), self_attention.causal_mask(6)
    bias = positions.alibi_bias(2, 6)
    assert torch.equal(ours(x, mask, bias), ref(x, mask, bias))
    with torch.no_grad():
        ours.ffn[0].bias.add_(1.0)
    assert not torch.allclose(ours(x, mask), ref(x, mask))


@pytest.mark.parametrize("scheme", ["learned", "shaw", "alibi"])
def test_positional_lm_takes_a_block_factory_and_defaults_to_pre_ln_blocks(scheme):
    config = plm.PositionalLMConfig(vocab_size=11, scheme=scheme, d_model=16, n_heads=2,
                                    n_layers=2, max_len=8, max_distance=3)
    torch.manual_seed(0)
    ours = plm.PositionalLM(config)
    torch.manual_seed(0)
    ref = plm.PositionalLM(config, block=lambda attn: transformer.Block(16, 2, attn=attn))
    assert all(isinstance(b, plm.PreLNBlock) for b in ours.blocks)
    assert all(isinstance(b, transformer.Block) for b in ref.blocks)
    x = torch.randint(0, 11, (3, 8))
    assert torch.equal(ours(x), ref(x))


@pytest.mark.parametrize("scheme", positions.SCHEMES)
def test_positional_lm_is_causal_and_overfits_one_batch(scheme):
    torch.manual_seed(0)
    model = plm.PositionalLM(plm.PositionalLMConfig(
        vocab_size=11, scheme=scheme, d_model=16, n_heads=2, n_layers=1, max_len=8,
        max_distance=3))
    x = torch.randint(0, 11, (4, 8))
    logits = model(x)
    assert logits.shape == (4, 8, 11)
    x2 = x.clone()
    x2[:, 5:] = (x2[:, 5:] + 1) % 11
    torch.testing.assert_close(model(x2)[:, :5], logits[:, :5])
    y = torch.randint(0, 11, (4, 8))
    opt = torch.optim.Adam(model.parameters(), 2e-2)
    for _ in range(80):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.3


def test_positional_lm_lengths_and_schemes():
    def config(scheme):
        return plm.PositionalLMConfig(vocab_size=5, scheme=scheme, d_model=8,
                                      n_heads=2, n_layers=1, max_len=4)

    model = plm.PositionalLM(config("learned"))
    with pytest.raises(ValueError, match="learned positions"):
        model(torch.zeros(1, 6, dtype=torch.long))
    for scheme in ("sinusoidal", "alibi", "rope", "shaw", "none"):  # any length
        m = plm.PositionalLM(config(scheme))
        assert m(torch.zeros(1, 9, dtype=torch.long)).shape == (1, 9, 5)


class Uniform(nn.Module):
    """Predicts every token with probability 1/v."""

    def __init__(self, v):
        super().__init__()
        self.v, self.w = v, nn.Parameter(torch.zeros(()))

    def forward(self, ids):
        return torch.zeros(*ids.shape, self.v) + self.w


def test_loss_by_position_known_answer():
    ids = torch.randint(0, 7, (50,))
    losses = plm.loss_by_position(Uniform(7), ids, 6, batch_size=3)
    torch.testing.assert_close(losses, torch.full((6,), math.log(7)))
    with pytest.raises(ValueError, match="shorter"):
        plm.loss_by_position(Uniform(7), ids[:5], 6)
