"""lecturelib.pretraining.finetune: copying a model that a forward pass has run
(a MoE GPT keeps its auxiliary loss, a tensor of the autograd graph, on its layers)."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import moe
from lecturelib.posttraining import chat, sft
from lecturelib.pretraining import finetune, gpt


def moe_gpt(vocab_size=11, seq_len=16):
    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=vocab_size, seq_len=seq_len, d_model=16, n_layers=2,
                           n_heads=2)
    return moe.MoEGPT(config, moe.MoEConfig(d_model=16, d_ff=32, n_experts=4, top_k=2))


def test_extend_vocab_of_a_moe_gpt_after_a_forward_pass():
    model = moe_gpt()
    ids = torch.randint(0, 11, (2, 8), generator=torch.Generator().manual_seed(1))
    logits = model(ids)
    assert not model.moe_layers()[0].aux_loss.is_leaf  # a forward pass left its graph
    bigger = finetune.extend_vocab(model, 3, generator=torch.Generator().manual_seed(0))
    assert type(bigger) is moe.MoEGPT and bigger.config.vocab_size == 14
    with torch.no_grad():
        torch.testing.assert_close(bigger(ids)[..., :11], logits)
    copied = bigger.moe_layers()[0].aux_loss
    assert copied.is_leaf and torch.equal(copied, model.moe_layers()[0].aux_loss.detach())
    bigger(ids).sum().backward()  # the copy trains
    assert bigger.embed.weight.grad is not None and model.embed.weight.grad is None


def test_copy_model_copies_everything_else_as_deepcopy_does():
    model = moe_gpt()
    model(torch.zeros(1, 4, dtype=torch.long))
    copied = finetune.copy_model(model)
    assert copied is not model and type(copied) is type(model)
    for (k, a), (j, b) in zip(model.state_dict().items(), copied.state_dict().items()):
        assert k == j and torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    assert copied.head.weight is copied.embed.weight  # tied stays tied
    with pytest.raises(TypeError, match=r"model must be an nn.Module; got str 'x'"):
        finetune.copy_model("x")


def test_sft_finetune_of_a_moe_gpt_after_a_forward_pass():
    model = moe_gpt(vocab_size=len(chat.VOCAB), seq_len=96)
    model(torch.zeros(1, 4, dtype=torch.long))
    recipe = sft.SFTRecipe(n_per_kind=2, batch_size=2, steps=2, warmup=1)
    tuned, hist = sft.finetune(model, recipe, progress=False)
    assert type(tuned) is moe.MoEGPT and len(hist.train_loss) == 2
