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
    ref = transformer.Block(transformer.StackConfig(d_model=8, n_heads=2),
                            attn=positions.RelativeAttention(8, 2, 3))
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
    stack = transformer.StackConfig(d_model=16, n_heads=2)
    ref = plm.PositionalLM(config, block=lambda attn: transformer.Block(stack, attn=attn))
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


def hf_t5_attention(n_heads, n_buckets, max_distance, is_decoder):
    """A randomly initialised T5Attention of `transformers` (nothing downloaded)."""
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = T5Config(d_model=16, d_kv=4, num_heads=n_heads, num_layers=1,
                      relative_attention_num_buckets=n_buckets,
                      relative_attention_max_distance=max_distance,
                      is_decoder=is_decoder)
    return T5Attention(config, has_relative_attention_bias=True)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("n_buckets, max_distance", [(32, 128), (8, 20), (5, 7)])
def test_t5_bucket_equals_transformers(bidirectional, n_buckets, max_distance):
    pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = torch.arange(-300, 301)[None, :] + torch.arange(0, 3)[:, None]
    ref = T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=n_buckets,
        max_distance=max_distance)
    ours = plm.t5_bucket(relative, bidirectional, n_buckets, max_distance)
    assert ours.dtype == torch.long
    assert torch.equal(ours, ref)
    assert 0 <= ours.min() and ours.max() < n_buckets


def test_t5_bucket_known_answers():
    d = torch.arange(-6, 7)
    # causal, 8 buckets: distances 0..3 exact, 4..15 in 4 log-wide buckets, then the last
    causal = plm.t5_bucket(-torch.tensor([0, 1, 3, 4, 5, 8, 15, 16, 1000]), False, 8, 16)
    assert causal.tolist() == [0, 1, 3, 4, 4, 6, 7, 7, 7]
    assert (plm.t5_bucket(d[d > 0], False, 8, 16) == 0).all()   # the future: bucket 0
    both = plm.t5_bucket(d, True, 8, 16)                         # 4 per direction
    assert both[6] == 0 and both[7] == 5 and both[5] == 1        # 0, +1, -1
    assert (both[d > 0] >= 4).all() and (both[d < 0] < 4).all()


@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("t, s", [(6, 6), (1, 9), (4, 300)])
def test_t5_bias_equals_transformers_position_bias(is_decoder, t, s):
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    ref = hf_t5_attention(3, 16, 64, is_decoder)
    ours = plm.T5Bias(3, 16, 64, bidirectional=not is_decoder)
    with torch.no_grad():
        ref.relative_attention_bias.weight.normal_()
    ours.load_state_dict({"table.weight": ref.relative_attention_bias.weight})
    # the last t of s positions: the queries of a decoding step after s - t tokens
    expected = ref.compute_bias(t, s, past_seen_tokens=s - t)       # (1, h, t, s)
    got = ours(t, s)
    assert got.shape == (3, t, s)
    torch.testing.assert_close(got, expected[0])


def test_t5_bias_is_a_function_of_the_offset_and_trains():
    torch.manual_seed(0)
    bias = plm.T5Bias(2, n_buckets=8, max_distance=16, bidirectional=False)
    b = bias(40)
    assert torch.equal(b[:, 10, 3], b[:, 30, 23])                  # the same offset
    assert torch.equal(b[:, 39, 0], b[:, 39, 20])                  # both beyond 16
    scores = torch.zeros(1, 2, 40, 40)
    self_attention.scaled_dot_product(scores, scores, scores[..., :1],
                                      self_attention.causal_mask(40), b)[0].sum().backward()
    assert bias.table.weight.grad is not None
