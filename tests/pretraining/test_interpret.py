"""lecturelib.pretraining.interpret: the lens's last layer is the model, the plain attention equals the
fused one, attention rows are causal distributions."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lecturelib.pretraining import gpt, interpret


def model(**kw) -> gpt.GPT:
    torch.manual_seed(0)
    args = {"vocab_size": 11, "seq_len": 16, "d_model": 32, "n_layers": 3, "n_heads": 4}
    args.update(kw)
    return gpt.GPT(gpt.GPTConfig(**args)).eval()


IDS = torch.randint(0, 11, (2, 10), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_lens_has_a_layer_per_block_and_ends_at_the_model(pos):
    m = model(positions=pos)
    lens = interpret.logit_lens(m, IDS)
    assert lens.shape == (4, 2, 10, 11)
    torch.testing.assert_close(lens[-1], m(IDS))
    torch.testing.assert_close(lens[0], m.head(m.norm(m.embed_ids(IDS))))


@pytest.mark.parametrize("pos, bias", [("rope", False), ("learned", True)])
def test_plain_attention_equals_the_fused_forward(pos, bias):
    m = model(positions=pos, bias=bias)
    x = torch.randn(2, 7, 32)
    for block in m.blocks:
        weights, out = interpret.attention(block.attn, x)
        torch.testing.assert_close(out, block.attn(x), rtol=1e-5, atol=1e-6)
        assert weights.shape == (2, 4, 7, 7)


def test_attention_maps_are_causal_distributions():
    maps = interpret.attention_maps(model(), IDS)
    assert maps.shape == (3, 2, 4, 10, 10)
    torch.testing.assert_close(maps.sum(-1), torch.ones(3, 2, 4, 10))
    assert maps.triu(1).abs().max() == 0
    assert (maps[..., 0, 0] == 1).all()  # the first position sees only itself


def test_lens_loss_and_rank_at_the_last_layer_are_the_models():
    m = model()
    loss, rank = interpret.lens_loss_rank(m, IDS)
    logits = m(IDS)[:, :-1]
    expected = F.cross_entropy(logits.flatten(0, 1), IDS[:, 1:].flatten())
    torch.testing.assert_close(loss[-1], expected)
    true = logits.gather(-1, IDS[:, 1:, None])
    torch.testing.assert_close(rank[-1], (logits > true).sum(-1).float().mean())
    assert loss.shape == rank.shape == (4,)

