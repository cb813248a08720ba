"""Bad input to lecturelib.efficiency.moe: the error and its message."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lecturelib.efficiency import moe
from lecturelib.pretraining import gpt


def layer(**kw) -> moe.MoE:
    torch.manual_seed(0)
    return moe.MoE(moe.MoEConfig(**{"d_model": 8, "d_ff": 16, "n_experts": 4, "top_k": 2,
                                   **kw}))


def experts(n: int = 4) -> nn.ModuleList:
    config = gpt.GPTConfig(vocab_size=1, d_model=8, d_ff=16, n_heads=1)
    return nn.ModuleList(gpt.MLP(config) for _ in range(n))


def gpt_config() -> gpt.GPTConfig:
    return gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=8, n_layers=1, n_heads=2)


X, W = torch.randn(3, 8), torch.full((3, 2), 0.5)
E = torch.tensor([[0, 1], [2, 3], [1, 0]])
KEEP = torch.ones(3, 2, dtype=torch.bool)

CASES = [
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, n_experts=4, top_k=5), ValueError,
     r"top_k must be an int in 1..n_experts = 4; got int 5"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, n_experts=4, top_k=0), ValueError,
     r"top_k must be an int in 1..n_experts = 4; got int 0"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, top_k=1.0), ValueError,
     r"top_k must be an int in 1..n_experts = 8; got float 1.0"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, capacity_factor=0), ValueError,
     r"capacity_factor must be a finite number > 0 or None; got int 0"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, capacity_factor=-1.25), ValueError,
     r"capacity_factor must be a finite number > 0 or None; got float -1.25"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, capacity_factor=float("inf")), ValueError,
     r"capacity_factor must be a finite number > 0 or None; got float inf"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, n_experts=0), ValueError,
     r"MoEConfig.n_experts must be an int >= 1; got int 0"),
    (lambda: moe.MoEConfig(d_model=0, d_ff=16), ValueError,
     r"MoEConfig.d_model must be an int >= 1; got int 0"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, balance_coef=-0.01), ValueError,
     r"MoEConfig.balance_coef must be a finite number in \[0, inf\); got float -0.01"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, dispatch="einsum"), ValueError,
     r"MoEConfig.dispatch must be one of \('sorted', 'loop', 'slots'\); got 'einsum'"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, dispatch="slots"), ValueError,
     r"MoEConfig.dispatch 'slots' needs a capacity_factor \(each expert's slots\); got "
     r"capacity_factor None"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, renormalise=1), TypeError,
     r"MoEConfig.renormalise must be a bool; got int 1"),
    (lambda: moe.MoEConfig(d_model=8, d_ff=16, renormalise="k > 1"), TypeError,
     r"MoEConfig.renormalise must be a bool; got str 'k > 1'"),
    (lambda: moe.top_k_gating(torch.randn(5, 4), 1, renormalise=0), TypeError,
     r"renormalise must be a bool; got int 0"),
    (lambda: moe.top_k_gating(torch.randn(5, 4), 5), ValueError,
     r"top_k must be an int in 1..n_experts = 4; got int 5"),
    (lambda: moe.top_k_gating(torch.randn(5, 4), 0), ValueError,
     r"top_k must be an int in 1..n_experts = 4; got int 0"),
    (lambda: moe.top_k_gating(torch.randn(2, 5, 4), 2), ValueError,
     r"logits must be \(n, E\); got shape \(2, 5, 4\)"),
    (lambda: moe.top_k_gating(torch.zeros(5, 4, dtype=torch.long), 2), TypeError,
     r"logits must be a float tensor \(n, E\); got torch.int64 tensor of shape \(5, 4\)"),
    (lambda: moe.expert_capacity(100, 8, 2, 0.0), ValueError,
     r"capacity_factor must be a finite number > 0 or None; got float 0.0"),
    (lambda: moe.expert_capacity(100, 8, 2, None), ValueError,
     r"factor must be a finite number > 0; got None"),
    (lambda: moe.expert_capacity(100, 8, 9, 1.0), ValueError,
     r"top_k must be an int in 1..n_experts = 8; got int 9"),
    (lambda: moe.expert_capacity(0, 8, 2, 1.0), ValueError,
     r"n_tokens must be an int >= 1; got int 0"),
    (lambda: moe.capacity_mask(torch.tensor([0, 1]), 4, 2), ValueError,
     r"experts must be an \(n, k\) long tensor; got torch.int64 tensor of shape \(2,\)"),
    (lambda: moe.capacity_mask(torch.tensor([[0, 4]]), 4, 2), ValueError,
     r"experts must hold expert ids in 0..3; got ids from 0 to 4"),
    (lambda: moe.capacity_mask(E, 4, -1), ValueError,
     r"capacity must be an int >= 0; got int -1"),
    (lambda: moe.dispatch_sorted(X[None], W, E, KEEP, experts()), ValueError,
     r"x must be \(n, d\); got shape \(1, 3, 8\)"),
    (lambda: moe.dispatch_loop(X, W[:2], E[:2], KEEP[:2], experts()), ValueError,
     r"weights, experts and keep must all be \(n, k\) with n = 3 rows of x; got \(2, 2\), "
     r"\(2, 2\) and \(2, 2\)"),
    (lambda: moe.dispatch_sorted(X, W, E, KEEP[:, :1], experts()), ValueError,
     r"weights, experts and keep must all be \(n, k\) with n = 3 rows of x; got \(3, 2\), "
     r"\(3, 2\) and \(3, 1\)"),
    (lambda: moe.dispatch_sorted(X, W, E, KEEP.int(), experts()), TypeError,
     r"keep must be an \(n, k\) bool tensor; got torch.int32 tensor of shape \(3, 2\)"),
    (lambda: moe.dispatch_sorted(X, W, E, KEEP, experts(3)), ValueError,
     r"experts must hold expert ids in 0..2; got ids from 0 to 3"),
    (lambda: moe.dispatch_slots(X, W, E, experts(), 0), ValueError,
     r"capacity must be an int >= 1; got int 0"),
    (lambda: moe.dispatch_slots(X, W, E, experts(3), 2), ValueError,
     r"experts must hold expert ids in 0..2; got ids from 0 to 3"),
    (lambda: moe.dispatch_slots(X, W[:2], E, experts(), 2), ValueError,
     r"weights, experts and keep must all be \(n, k\)"),
    (lambda: moe.queue_position(E.float(), 4), TypeError,
     r"experts must be an \(n, k\) long tensor; got torch.float32 tensor"),
    (lambda: moe.dispatch_loop(X, W, E, KEEP, []), TypeError,
     r"expert_fns must be a non-empty list of callables, one per expert; got list \[\]"),
    (lambda: moe.load_balancing_loss(torch.randn(3, 4), E[:2]), ValueError,
     r"experts has 2 rows but logits has 3; both need one row per token"),
    (lambda: moe.load_balancing_loss(torch.randn(3, 2), E), ValueError,
     r"experts must hold expert ids in 0..1; got ids from 0 to 3"),
    (lambda: moe.load_balancing_loss(torch.randn(0, 4), E[:0]), ValueError,
     r"logits must be \(n, E\) with n >= 1 tokens and E >= 1 experts \(a mean over no "
     r"token is NaN\); got shape \(0, 4\)"),
    (lambda: moe.router_z_loss(torch.randn(0, 4)), ValueError,
     r"logits must be \(n, E\) with n >= 1 tokens .*got shape \(0, 4\)"),
    (lambda: layer()(torch.randn(0, 3, 8)), ValueError,
     r"x must hold at least one token \(the auxiliary losses are means over the "
     r"tokens, NaN over none\); got shape \(0, 3, 8\)"),
    (lambda: layer()(torch.randn(2, 0, 8)), ValueError,
     r"x must hold at least one token .*got shape \(2, 0, 8\)"),
    (lambda: moe.router_z_loss(torch.randn(4)), ValueError,
     r"logits must be \(n, E\); got shape \(4,\)"),
    (lambda: moe.MoE({"d_model": 8}), TypeError, r"config must be a MoEConfig; got dict"),
    (lambda: layer()(torch.randn(2, 8)), ValueError,
     r"x must be \(b, t, d_model\); got shape \(2, 8\)"),
    (lambda: layer()(torch.randn(2, 3, 6)), ValueError,
     r"x must have d_model = 8 features; got shape \(2, 3, 6\)"),
    (lambda: layer()(torch.zeros(2, 3, 8, dtype=torch.long)), TypeError,
     r"x must be a float tensor \(b, t, d_model\); got torch.int64"),
    (lambda: moe.MoEGPT(gpt_config(), {"n_experts": 4}), TypeError,
     r"moe must be a MoEConfig; got dict"),
    (lambda: moe.MoEGPT(gpt_config(), moe.MoEConfig(d_model=16, d_ff=32)), ValueError,
     r"moe.d_model \(16\) must equal the GPT's d_model \(8\)"),
    (lambda: moe.moe_lm_loss(gpt.GPT(gpt_config()), (torch.zeros(1, 4, dtype=torch.long),
                                                     torch.zeros(1, 4, dtype=torch.long))),
     TypeError, r"model must be a MoEGPT; got GPT"),
    (lambda: moe.param_counts(nn.Linear(2, 2)), TypeError,
     r"model must be a gpt.GPT or MoEGPT; got Linear"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
