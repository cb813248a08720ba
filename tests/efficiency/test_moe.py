"""lecturelib.efficiency.moe: the batched dispatch equals the loop (outputs and gradients), capacity
drops exactly the assignments beyond it, the balancing loss has its known values, an MoE
of identical experts is one MLP, the MoE GPT counts its parameters right and learns."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lecturelib import train
from lecturelib.efficiency import moe
from lecturelib.pretraining import gpt
from lecturelib.recurrence import lm


def mlps(n: int, d: int = 8, d_ff: int = 16) -> nn.ModuleList:
    config = gpt.GPTConfig(vocab_size=1, d_model=d, d_ff=d_ff, n_heads=1)
    return nn.ModuleList(gpt.MLP(config) for _ in range(n))


def gpt_config(**kw) -> gpt.GPTConfig:
    args = {"vocab_size": 11, "seq_len": 16, "d_model": 16, "n_layers": 2, "n_heads": 2}
    return gpt.GPTConfig(**{**args, **kw})


def test_top_k_gating_picks_the_largest_logits_and_weights_sum_to_one():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, -1.0, 0.0, 4.0]])
    weights, experts = moe.top_k_gating(logits, 2)
    assert experts.tolist() == [[1, 3], [0, 3]]
    torch.testing.assert_close(weights[0], torch.softmax(torch.tensor([3.0, 2.0]), 0))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))


def test_top_1_gate_is_the_softmax_probability_switch_transformer():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, -1.0, 0.0, 4.0]])
    weights, experts = moe.top_k_gating(logits, 1)
    assert experts.tolist() == [[1], [0]]
    torch.testing.assert_close(weights, torch.softmax(logits, -1).amax(-1, keepdim=True))
    assert (weights < 1).all()  # not renormalised to a constant 1
    renormalised, same = moe.top_k_gating(logits, 1, renormalise=True)
    assert torch.equal(same, experts) and torch.equal(renormalised, torch.ones(2, 1))


@pytest.mark.parametrize("k", [2, 3, 4])
def test_top_k_gates_sum_to_one_for_k_above_one_unless_told_not_to(k):
    logits = torch.randn(7, 5, generator=torch.Generator().manual_seed(k))
    weights, experts = moe.top_k_gating(logits, k)
    torch.testing.assert_close(weights.sum(-1), torch.ones(7))
    torch.testing.assert_close(weights, torch.softmax(logits.gather(1, experts), -1))
    raw, _ = moe.top_k_gating(logits, k, renormalise=False)
    torch.testing.assert_close(raw, torch.softmax(logits, -1).gather(1, experts))


def router_grads(top_k: int, renormalise=None) -> list[torch.Tensor]:
    """The gradient of the next-token loss alone (no auxiliary loss) on every router."""
    torch.manual_seed(0)
    config = moe.MoEConfig(d_model=16, d_ff=32, n_experts=4, top_k=top_k,
                           balance_coef=0.0, renormalise=renormalise)
    m = moe.MoEGPT(gpt_config(), config)
    x = torch.randint(0, 11, (4, 16), generator=torch.Generator().manual_seed(1))
    lm.next_token_loss(m, (x[:, :-1], x[:, 1:])).backward()
    return [layer.router.weight.grad for layer in m.moe_layers()]


def test_top_1_router_learns_from_the_lm_loss_alone_a_renormalised_gate_does_not():
    assert all(g.norm() > 0 for g in router_grads(1))  # Switch: gate = p_e(x)
    assert all(g.abs().max() == 0 for g in router_grads(1, renormalise=True))
    assert all(g.norm() > 0 for g in router_grads(2))  # Mixtral: chosen experts' logits


def test_top_2_lm_loss_reaches_only_the_chosen_experts_logits():
    torch.manual_seed(0)
    router, experts = nn.Linear(8, 4, bias=False), mlps(4)
    x = torch.randn(6, 8)
    logits = router(x)
    logits.retain_grad()
    weights, chosen = moe.top_k_gating(logits, 2)
    y = moe.dispatch_sorted(x, weights, chosen, torch.ones_like(chosen, dtype=torch.bool),
                            experts)
    (y.sin() * y).sum().backward()
    unchosen = torch.ones_like(logits, dtype=torch.bool).scatter(1, chosen, False)
    assert logits.grad[unchosen].abs().max() == 0
    assert logits.grad[~unchosen].abs().min() > 0


def test_top_1_switch_gate_passes_a_gradient_to_every_logit():
    logits = torch.randn(6, 4, generator=torch.Generator().manual_seed(0),
                         requires_grad=True)
    weights, _ = moe.top_k_gating(logits, 1)
    (weights * torch.randn(6, 1, generator=torch.Generator().manual_seed(1))).sum().backward()
    assert (logits.grad != 0).all()


def test_balancing_loss_is_normalised_by_assignments_mixtral_s_is_k_times_it():
    """transformers' Mixtral load_balancing_loss_func averages the (n, k, E) one-hot
    over tokens only; ours over the n·k assignments, so it is 1 at balance for any k."""
    n, e, k = 24, 4, 2
    logits = torch.randn(n, e, generator=torch.Generator().manual_seed(0))
    chosen = logits.topk(k, -1).indices
    mask = torch.nn.functional.one_hot(chosen, e).float()          # (n, k, E)
    mixtral = e * (mask.mean(0) * torch.softmax(logits, -1).mean(0)).sum()
    torch.testing.assert_close(mixtral, k * moe.load_balancing_loss(logits, chosen))


def test_capacity_is_the_fair_share_times_the_factor():
    assert moe.expert_capacity(2048, 8, 2, 1.25) == 640
    assert moe.expert_capacity(6, 3, 2, 0.5) == 2
    assert moe.expert_capacity(10, 3, 1, 1.0) == 4  # rounded up


def test_capacity_mask_serves_first_choices_first():
    chosen = torch.tensor([[0, 1], [0, 2], [0, 1], [0, 2], [1, 2], [2, 1]])
    keep = moe.capacity_mask(chosen, 3, 2)
    assert keep.tolist() == [[True, True], [True, True], [False, False],
                             [False, False], [True, False], [True, False]]
    assert moe.capacity_mask(chosen, 3, 12).all()
    assert not moe.capacity_mask(chosen, 3, 0).any()


@pytest.mark.parametrize("seed", range(5))
def test_capacity_mask_keeps_min_of_load_and_capacity_per_expert(seed):
    g = torch.Generator().manual_seed(seed)
    chosen = torch.stack([torch.randperm(5, generator=g)[:2] for _ in range(40)])
    cap = int(torch.randint(0, 20, (1,), generator=g))
    keep = moe.capacity_mask(chosen, 5, cap)
    load = torch.bincount(chosen.flatten(), minlength=5)
    assert torch.equal(torch.bincount(chosen[keep], minlength=5), load.clamp(max=cap))


@pytest.mark.parametrize("k, factor", [(1, None), (2, None), (2, 0.75), (3, 0.5), (4, 2.0)])
def test_sorted_dispatch_equals_the_loop_outputs_and_gradients(k, factor):
    torch.manual_seed(k)
    router, experts = nn.Linear(8, 4, bias=False), mlps(4)
    x = torch.randn(13, 8, requires_grad=True)
    weights, chosen = moe.top_k_gating(router(x), k)
    keep = torch.ones_like(chosen, dtype=torch.bool)
    if factor is not None:
        keep = moe.capacity_mask(chosen, 4, moe.expert_capacity(13, 4, k, factor))
    wrt = [x, *router.parameters(), *experts.parameters()]
    out = {}
    for dispatch in (moe.dispatch_sorted, moe.dispatch_loop):
        y = dispatch(x, weights, chosen, keep, experts)
        out[dispatch] = (y, torch.autograd.grad((y.sin() * y).sum(), wrt, retain_graph=True))
    (y1, g1), (y2, g2) = out.values()
    torch.testing.assert_close(y1, y2, atol=1e-6, rtol=1e-5)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("k, factor", [(1, 0.5), (1, 1.25), (2, 0.75), (2, 1.25), (3, 0.5),
                                       (4, 2.0)])
def test_slot_dispatch_equals_the_sorted_one_with_the_capacity_mask(k, factor):
    torch.manual_seed(k)
    router, experts = nn.Linear(8, 4, bias=False), mlps(4)
    x = torch.randn(13, 8, requires_grad=True)
    weights, chosen = moe.top_k_gating(router(x), k)
    cap = moe.expert_capacity(13, 4, k, factor)
    keep = moe.capacity_mask(chosen, 4, cap)
    wrt = [x, *router.parameters(), *experts.parameters()]
    out = []
    for y in (moe.dispatch_slots(x, weights, chosen, experts, cap),
              moe.dispatch_sorted(x, weights, chosen, keep, experts)):
        out.append((y, torch.autograd.grad((y.sin() * y).sum(), wrt, retain_graph=True)))
    (y1, g1), (y2, g2) = out
    torch.testing.assert_close(y1, y2, atol=1e-6, rtol=1e-5)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    if factor < 1:
        assert not keep.all()  # the capacity dropped assignments


def test_queue_position_counts_first_choices_first():
    chosen = torch.tensor([[0, 1], [0, 2], [1, 0]])
    # expert 0 serves the first choices of tokens 0 and 1, then token 2's second;
    # expert 1 token 2's first choice, then token 0's second
    assert moe.queue_position(chosen, 3).tolist() == [[0, 1], [1, 0], [0, 2]]


def test_a_dropped_assignment_contributes_nothing():
    experts = mlps(2)
    x = torch.randn(3, 8)
    weights, chosen = torch.ones(3, 1), torch.zeros(3, 1, dtype=torch.long)
    keep = torch.tensor([[True], [False], [True]])
    y = moe.dispatch_sorted(x, weights, chosen, keep, experts)
    assert torch.equal(y[1], torch.zeros(8))
    torch.testing.assert_close(y[0], experts[0](x[:1])[0])


def test_balancing_loss_is_one_when_uniform_and_e_when_collapsed():
    n, e = 32, 8
    uniform = moe.load_balancing_loss(torch.zeros(n, e), (torch.arange(n) % e)[:, None])
    torch.testing.assert_close(uniform, torch.tensor(1.0))
    logits = torch.full((n, e), -30.0)
    logits[:, 3] = 30.0
    collapsed = moe.load_balancing_loss(logits, torch.full((n, 2), 3))
    torch.testing.assert_close(collapsed, torch.tensor(float(e)))


def test_balancing_loss_pushes_down_the_busy_experts_probability():
    logits = torch.zeros(4, 3, requires_grad=True)
    moe.load_balancing_loss(logits, torch.tensor([[0], [0], [0], [1]])).backward()
    grad = logits.grad.sum(0)
    assert grad[0] > grad[1] > grad[2]  # descent lowers expert 0 most


def test_router_z_loss_known_value():
    torch.testing.assert_close(moe.router_z_loss(torch.zeros(5, 4)),
                               torch.tensor(math.log(4) ** 2))


def test_moe_of_identical_experts_all_chosen_is_one_mlp():
    torch.manual_seed(0)
    layer = moe.MoE(moe.MoEConfig(d_model=8, d_ff=16, n_experts=3, top_k=3))
    mlp = mlps(1)[0]
    for expert in layer.experts:
        expert.load_state_dict(mlp.state_dict())
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(layer(x), mlp(x), atol=1e-6, rtol=1e-5)
    assert layer.stats.load.tolist() == [10, 10, 10]
    assert layer.stats.dropped == 0 and layer.stats.assignments == 30


def test_layer_dispatches_agree_and_record_the_drops():
    torch.manual_seed(0)
    layer = moe.MoE(moe.MoEConfig(d_model=8, d_ff=16, n_experts=4, top_k=2,
                                  capacity_factor=0.5))
    x = torch.randn(2, 6, 8)
    y_sorted = layer(x)
    dropped = layer.stats.dropped
    layer.config.dispatch = "loop"
    torch.testing.assert_close(layer(x), y_sorted, atol=1e-6, rtol=1e-5)
    assert dropped == layer.stats.dropped >= 24 - 4 * 3  # capacity 3 per expert
    assert int(layer.stats.load.sum()) == 24
    layer.config.dispatch = "slots"
    torch.testing.assert_close(layer(x), y_sorted, atol=1e-6, rtol=1e-5)
    assert layer.stats.dropped == dropped


def test_moe_gpt_parameters_total_and_activated():
    config = gpt_config()
    torch.manual_seed(0)
    dense = gpt.GPT(config)
    m = moe.MoEGPT(config, moe.MoEConfig(d_model=16, d_ff=32, n_experts=4, top_k=2))
    assert moe.param_counts(dense) == (gpt.n_params(dense),) * 2
    total, active = moe.param_counts(m)
    L, d = 2, 16
    assert active == gpt.n_params(dense) + L * 4 * d      # routers
    assert total == active + L * 2 * (2 * d * 32)         # two idle experts per layer
    assert total == sum(p.numel() for p in m.parameters()) - 11 * 16


def test_moe_gpt_is_causal_and_its_aux_loss_reaches_the_router():
    torch.manual_seed(0)
    m = moe.MoEGPT(gpt_config(), moe.MoEConfig(d_model=16, d_ff=32, n_experts=4))
    ids = torch.randint(0, 11, (1, 16))
    changed = ids.clone()
    changed[0, 9:] = (changed[0, 9:] + 1) % 11
    with torch.no_grad():  # equal up to rounding: experts see other row groupings
        torch.testing.assert_close(m(ids)[0, :9], m(changed)[0, :9])
        assert not torch.allclose(m(ids)[0, 9:], m(changed)[0, 9:])
    m(ids)
    m.aux_loss().backward()
    assert all(layer.router.weight.grad.abs().sum() > 0 for layer in m.moe_layers())


def test_moe_gpt_overfits_one_batch():
    torch.manual_seed(0)
    m = moe.MoEGPT(gpt_config(), moe.MoEConfig(d_model=16, d_ff=32, n_experts=4))
    x = torch.randint(0, 11, (4, 16))
    batch = (x[:, :-1], x[:, 1:])
    hist = train.fit(m, [batch], moe.moe_lm_loss, steps=50, lr=2e-2, progress=False)
    assert hist.train_loss[-1] < 0.3 * hist.train_loss[0]
    assert lm.next_token_loss(m, batch) < 0.6


def test_with_capacity_later_tokens_can_change_earlier_outputs():
    """All first choices are served before any second choice, so a later token's first
    choice can take the slot of an earlier token's second: capacity is not causal."""
    torch.manual_seed(1)
    layer = moe.MoE(moe.MoEConfig(d_model=8, d_ff=16, n_experts=4, top_k=2,
                                  capacity_factor=1.0))
    x = torch.randn(1, 12, 8)
    changed = x.clone()
    changed[0, 6:] = torch.randn(6, 8)
    with torch.no_grad():
        assert not torch.allclose(layer(x)[0, :6], layer(changed)[0, :6])
        layer.config.capacity_factor = None  # without capacity: causal (per token)
        torch.testing.assert_close(layer(x)[0, :6], layer(changed)[0, :6])
