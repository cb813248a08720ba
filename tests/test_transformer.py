"""lecturelib.transformer: the block against torch.nn.TransformerEncoderLayer/DecoderLayer."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lecturelib import attention, transformer


def copy_block(ref: nn.Module, cross: bool) -> transformer.Block:
    ours = transformer.Block(16, 4, d_ff=32, norm_first=ref.norm_first, cross=cross)
    ours.attn = attention.from_torch(ref.self_attn)
    if cross:
        ours.cross = attention.from_torch(ref.multihead_attn)
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
    mask = attention.causal_mask(5)
    torch.testing.assert_close(ours(x, mask), ref(x, src_mask=~mask))


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_with_cross_attention_equals_torch_decoder_layer(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, activation="gelu",
                                     batch_first=True, norm_first=norm_first).eval()
    ours = copy_block(ref, cross=True)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    mask = attention.causal_mask(5)
    torch.testing.assert_close(ours(x, mask, memory=memory), ref(x, memory, tgt_mask=~mask))


def test_block_without_residual_and_bad_input():
    block = transformer.Block(8, 2, residual=False)
    x = torch.randn(1, 3, 8)
    assert block(x).shape == (1, 3, 8)
    with pytest.raises(ValueError, match="memory"):
        block(x, memory=x)
    with pytest.raises(ValueError, match="memory"):
        transformer.Block(8, 2, cross=True)(x)
