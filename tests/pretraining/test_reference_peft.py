"""lecturelib.pretraining.peft's LoRA against the `peft` library on the same weights.

Our GPT fuses W_Q, W_K, W_V into one ``qkv`` Linear; `add_lora(parts="qv")` puts one
adapter (A, B) on the q rows and one on the v rows. The reference is the same GPT whose
``qkv`` is three separate Linears ``q``, ``k``, ``v`` holding the fused rows, with
`peft.LoraConfig(target_modules=["q", "v"])`: the paper's and the library's placement,
separate A_q, B_q, A_v, B_v. With the same A and B (B nonzero) both must give the same
logits and gradients, the same merged weights, and train the same number of parameters.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

hf_peft = pytest.importorskip("peft")

from lecturelib.pretraining import gpt, peft  # noqa: E402
from lecturelib.recurrence import lm  # noqa: E402

IDS = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(1))


class SplitQKV(nn.Module):
    """The fused ``qkv`` Linear as three Linears ``q``, ``k``, ``v`` with its rows."""

    def __init__(self, fused: nn.Linear):
        super().__init__()
        d = fused.in_features
        bias = fused.bias is not None
        self.q, self.k, self.v = (nn.Linear(d, d, bias=bias) for _ in range(3))
        with torch.no_grad():
            for i, linear in enumerate((self.q, self.k, self.v)):
                linear.weight.copy_(fused.weight[i * d : (i + 1) * d])
                if bias:
                    linear.bias.copy_(fused.bias[i * d : (i + 1) * d])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.q(x), self.k(x), self.v(x)], -1)


def pair(parts: str, r: int, alpha: float, **config):
    """Our LoRA GPT and peft's on the same base weights and the same A and B."""
    torch.manual_seed(0)
    args = {"vocab_size": 11, "seq_len": 16, "d_model": 32, "n_layers": 2, "n_heads": 4}
    base = gpt.GPT(gpt.GPTConfig(**{**args, **config})).eval()
    with torch.no_grad():  # nonzero biases, so that they are compared too
        for p in base.parameters():
            if p.dim() == 1:
                p.normal_(0, 0.1)
    reference = copy.deepcopy(base)
    for block in reference.blocks:
        block.attn.qkv = SplitQKV(block.attn.qkv)
    ours = peft.add_lora(base, r=r, alpha=alpha, parts=parts)
    lora_config = hf_peft.LoraConfig(
        r=r,
        lora_alpha=alpha,
        target_modules=list(parts),
        lora_dropout=0.0,
        init_lora_weights=False,
    )
    theirs = hf_peft.get_peft_model(reference, lora_config).eval()
    with torch.no_grad():
        for block, ref_block in zip(ours.blocks, theirs.base_model.model.blocks):
            layer = block.attn.qkv
            torch.nn.init.normal_(layer.B, std=0.5)  # as if trained: not zero
            for g, s in enumerate(parts):
                target = getattr(ref_block.attn.qkv, s)
                target.lora_A["default"].weight.copy_(layer.A[g])
                target.lora_B["default"].weight.copy_(layer.B[g])
    return ours, theirs


CASES = [
    ("qv", 4, 8.0, {}),
    ("qv", 2, 16.0, {"bias": True}),
    ("qv", 4, 4.0, {"positions": "learned"}),
    ("v", 3, 6.0, {}),
    ("qkv", 4, 8.0, {}),
]


@pytest.mark.parametrize("parts, r, alpha, config", CASES)
def test_lora_gives_peft_s_logits_and_gradients(parts, r, alpha, config):
    ours, theirs = pair(parts, r, alpha, **config)
    out_ours, out_theirs = ours(IDS), theirs(IDS)
    with theirs.disable_adapter():  # the frozen model: the update is not negligible
        assert (out_ours - theirs(IDS)).abs().max() > 1e-3
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-5, atol=1e-5)
    batch = (IDS[:, :-1], IDS[:, 1:])
    lm.next_token_loss(ours, batch).backward()
    lm.next_token_loss(theirs, batch).backward()
    for block, ref_block in zip(ours.blocks, theirs.base_model.model.blocks):
        layer = block.attn.qkv
        for g, s in enumerate(parts):
            target = getattr(ref_block.attn.qkv, s)
            grad_a = target.lora_A["default"].weight.grad
            grad_b = target.lora_B["default"].weight.grad
            torch.testing.assert_close(layer.A.grad[g], grad_a, rtol=1e-4, atol=1e-6)
            torch.testing.assert_close(layer.B.grad[g], grad_b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("parts, r, alpha, config", CASES)
def test_lora_merges_into_peft_s_merged_weights(parts, r, alpha, config):
    ours, theirs = pair(parts, r, alpha, **config)
    before = ours(IDS)
    merged_theirs = theirs.merge_and_unload()
    peft.merge_lora(ours)
    torch.testing.assert_close(ours(IDS), before, rtol=1e-5, atol=1e-5)  # merged == unmerged
    torch.testing.assert_close(ours(IDS), merged_theirs(IDS), rtol=1e-5, atol=1e-5)
    for block, ref_block in zip(ours.blocks, merged_theirs.blocks):
        split = ref_block.attn.qkv
        assert all(type(getattr(split, s)) is nn.Linear for s in "qkv")  # unloaded
        fused = torch.cat([getattr(split, s).weight for s in "qkv"])
        torch.testing.assert_close(block.attn.qkv.weight, fused, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("parts, r, alpha, config", CASES)
def test_lora_trains_as_many_parameters_as_peft(parts, r, alpha, config):
    ours, theirs = pair(parts, r, alpha, **config)
    assert peft.trainable(ours) == theirs.get_nb_trainable_parameters()
    d, n_layers = 32, 2
    assert peft.trainable(ours)[0] == n_layers * len(parts) * 2 * d * r


def test_lora_on_q_and_v_at_d_32_r_4_trains_512_parameters_per_layer():
    ours, _ = pair("qv", 4, 8.0)
    assert peft.trainable(ours)[0] == 2 * 512  # A_q, B_q, A_v, B_v: 4 · 32 · 4
