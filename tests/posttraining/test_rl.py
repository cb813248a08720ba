"""lecturelib.posttraining.rl: REINFORCE is unbiased and a baseline cuts its variance,
the clipped surrogate and group advantages equal hand-computed values and TRL's GRPO
formulas, and a checker that compares characters can be fooled."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.posttraining import rl


# ------------------------------------------------------------------------ REINFORCE


def reinforce_gradients(baseline, n_batches: int, batch: int = 100):
    """The REINFORCE gradient of ``−E[R]`` for a categorical policy, from ``n_batches``
    batches of samples, and the exact gradient."""
    logits = torch.tensor(
        [0.5, -0.3, 0.1, 0.8], dtype=torch.float64, requires_grad=True
    )
    R = torch.tensor([10.0, 11.0, 12.0, 14.0], dtype=torch.float64)
    p = torch.softmax(logits, 0).detach()
    exact = -(p * (R - (p * R).sum()))  # −∇_θ Σ p_a R_a
    g = torch.Generator().manual_seed(0)
    grads = []
    for _ in range(n_batches):
        a = torch.multinomial(p, batch, replacement=True, generator=g)
        logp = torch.log_softmax(logits, 0)[a]
        (grad,) = torch.autograd.grad(rl.reinforce_loss(logp, R[a], baseline), logits)
        grads.append(grad)
    return torch.stack(grads), exact


def test_reinforce_is_unbiased_with_and_without_a_baseline():
    for baseline in (0.0, 12.0):
        grads, exact = reinforce_gradients(baseline, n_batches=400)
        error = (grads.mean(0) - exact).abs()
        assert (error < 4 * grads.std(0) / math.sqrt(400)).all()  # 4 standard errors
    held, _ = reinforce_gradients(torch.tensor(12.0, requires_grad=True), 400)
    assert torch.equal(held, grads)  # a baseline tensor is held constant too


def test_a_baseline_cuts_the_variance_of_reinforce():
    plain, _ = reinforce_gradients(0.0, n_batches=200)
    centred, _ = reinforce_gradients(12.0, n_batches=200)
    assert centred.var(0).sum() < plain.var(0).sum() / 20


def test_reinforce_holds_the_advantage_constant():
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    rewards = torch.tensor([1.0, 0.0], requires_grad=True)
    loss = rl.reinforce_loss(logp, rewards, torch.tensor([0.5, 0.5]))
    loss.backward()
    torch.testing.assert_close(loss, torch.tensor(-(0.5 * -1.0 + -0.5 * -2.0) / 2))
    torch.testing.assert_close(logp.grad, torch.tensor([-0.25, 0.25]))
    assert rewards.grad is None


# ----------------------------------------------------------------------------- PPO clip

# ratio, advantage, loss −min(ρA, clip(ρ)A) with ε = 0.2, d loss / d log ρ
CLIP_CASES = [
    (1.1, 1.0, -1.1, -1.1),  # inside the clip range: the plain surrogate
    (1.5, 1.0, -1.2, 0.0),  # A > 0 and ρ > 1 + ε: clipped, no gradient
    (0.5, 1.0, -0.5, -0.5),  # A > 0 and ρ < 1 − ε: the min keeps ρA, gradient flows
    (0.9, -1.0, 0.9, 0.9),  # inside, A < 0
    (0.5, -1.0, 0.8, 0.0),  # A < 0 and ρ < 1 − ε: clipped, no gradient
    (1.5, -1.0, 1.5, 1.5),  # A < 0 and ρ > 1 + ε: the min keeps ρA, gradient flows
    (1.0, 2.0, -2.0, -2.0),  # ρ = 1: the policy gradient −A
]


@pytest.mark.parametrize("ratio, advantage, loss, grad", CLIP_CASES)
def test_clipped_loss_equals_hand_computed_values(ratio, advantage, loss, grad):
    logp_old = torch.tensor([-1.0], dtype=torch.float64)
    logp_new = (logp_old + math.log(ratio)).requires_grad_(True)
    A = torch.tensor([advantage], dtype=torch.float64)
    out = rl.ppo_clipped_loss(logp_new, logp_old, A, clip=0.2)
    out.sum().backward()
    assert math.isclose(out.item(), loss, rel_tol=1e-12)
    assert math.isclose(logp_new.grad.item(), grad, rel_tol=1e-12, abs_tol=1e-15)


def test_a_sequence_advantage_applies_to_each_of_its_tokens():
    g = torch.Generator().manual_seed(0)
    logp_new, logp_old = -torch.rand(2, 3, 5, generator=g)
    A = torch.tensor([1.0, -2.0, 0.5])
    torch.testing.assert_close(
        rl.ppo_clipped_loss(logp_new, logp_old, A),
        rl.ppo_clipped_loss(logp_new, logp_old, A[:, None].expand(3, 5)),
    )


# ----------------------------------------------------------------------------- GRPO


def trl_advantages(rewards, num_generations):
    """TRL's ``GRPOTrainer._generate_and_score_completions`` (trl/trainer/
    grpo_trainer.py): group mean and ``std`` (torch's default: unbiased), repeated over
    each group, ``(rewards − mean) / (std + 1e-4)``."""
    mean = rewards.view(-1, num_generations).mean(dim=1)
    std = rewards.view(-1, num_generations).std(dim=1)
    mean = mean.repeat_interleave(num_generations, dim=0)
    std = std.repeat_interleave(num_generations, dim=0)
    return (rewards - mean) / (std + 1e-4)


def test_group_advantages_equal_hand_computed_values_and_trl():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 3.0])
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)  # group 1: mean ½, unbiased std √(1/3)
    b = 0.75 / (1.5 + 1e-4)  # group 3: mean ¾, std √(3·(¾)²+(9/4)²)/3) = 1.5
    expected = torch.tensor([a, -a, -a, a, 0, 0, 0, 0, -b, -b, -b, 3 * b])
    torch.testing.assert_close(rl.group_advantages(rewards, 4), expected)
    torch.testing.assert_close(
        rl.group_advantages(rewards, 4), trl_advantages(rewards, 4)
    )
    torch.testing.assert_close(
        rl.group_advantages(rewards, 4, normalise=False),
        torch.tensor([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0, -0.75, -0.75, -0.75, 2.25]),
    )


@pytest.mark.parametrize("eps", [0.0, 1e-4])
@pytest.mark.parametrize("normalise", [True, False])
def test_a_group_of_equal_rewards_gets_zero_advantages(eps, normalise):
    """Exactly zero, with eps = 0 too (0/0 was NaN), and for rewards whose mean rounds
    (0.1 three times sums to 0.30000000000000004)."""
    rewards = torch.tensor([0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 0.0, 1.0, 0.5],
                           dtype=torch.float64)
    a = rl.group_advantages(rewards, 3, normalise=normalise, eps=eps)
    assert torch.equal(a[:6], torch.zeros(6, dtype=torch.float64))
    assert a[6:].isfinite().all() and (a[6:] != 0).sum() == 2


def test_group_advantages_are_centred_and_scaled_within_each_group():
    rewards = torch.randn(5 * 8, generator=torch.Generator().manual_seed(1))
    a = rl.group_advantages(rewards, 8).view(5, 8)
    torch.testing.assert_close(a.mean(1), torch.zeros(5), atol=1e-6, rtol=0)
    torch.testing.assert_close(a.std(1), torch.ones(5), atol=1e-3, rtol=0)


def trl_grpo_loss(
    per_token_logps,
    old_per_token_logps,
    ref_per_token_logps,
    advantages,
    completion_mask,
    epsilon,
    beta,
):
    """TRL's ``GRPOTrainer._compute_loss`` with ``loss_type="grpo"``: k3 KL per token,
    ``−min(coef_1·A, clamp(coef_1, 1 − ε, 1 + ε)·A) + β·kl``, averaged over each
    completion's tokens, then over completions."""
    per_token_kl = (
        torch.exp(ref_per_token_logps - per_token_logps)
        - (ref_per_token_logps - per_token_logps)
        - 1
    )
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)
    coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
    per_token_loss1 = coef_1 * advantages.unsqueeze(1)
    per_token_loss2 = coef_2 * advantages.unsqueeze(1)
    per_token_loss = -torch.min(per_token_loss1, per_token_loss2) + beta * per_token_kl
    mask = completion_mask.float()
    return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


def grpo_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logp = -2 * torch.rand(6, 7, generator=g, dtype=torch.float64) - 2  # all < -0.5:
    # ρ = π/π_old on both sides of the clip range (old and ref stay log-probabilities)
    old = logp + 0.4 * torch.randn(6, 7, generator=g, dtype=torch.float64)
    ref = logp + 0.3 * torch.randn(6, 7, generator=g, dtype=torch.float64)
    A = torch.randn(6, generator=g, dtype=torch.float64)
    mask = torch.arange(7) < torch.tensor([7, 3, 5, 1, 6, 4])[:, None]
    return logp.requires_grad_(True), old, ref, A, mask


def test_grpo_loss_equals_trls_formula():
    logp, old, ref, A, mask = grpo_inputs()
    for beta in (0.0, 0.04, 0.5):
        ours = rl.grpo_loss(logp, old, ref, A, mask, clip=0.2, beta=beta)
        torch.testing.assert_close(
            ours, trl_grpo_loss(logp, old, ref, A, mask, 0.2, beta)
        )
    ratio = (logp - old).exp()
    assert ((ratio < 0.8) & mask).any() and ((ratio > 1.2) & mask).any()


def test_grpo_gradient_is_the_policy_gradient_at_the_sampling_policy():
    logp, _, ref, A, mask = grpo_inputs(1)
    loss = rl.grpo_loss(logp, logp.detach(), ref, A, mask, beta=0.0)
    (grad,) = torch.autograd.grad(loss, logp)
    n_tokens = mask.sum(-1, keepdim=True)
    expected = torch.where(mask, -A[:, None] / n_tokens / len(A), 0.0)
    torch.testing.assert_close(grad, expected)


def test_logp_old_and_the_advantages_are_constants_even_when_they_carry_a_gradient():
    """The same tensor as logp_new and logp_old (the first of GRPO's iterations, not
    detached): ρ = 1 and dρ/dlogp = 1, not the 0 of exp(logp − logp)."""
    logp = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    A = torch.ones(2, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(rl.ppo_clipped_loss(logp, logp, A).sum(), logp)
    assert torch.equal(grad, torch.full((2, 3), -1.0, dtype=torch.float64))
    old = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    rl.ppo_clipped_loss(logp, old, A).sum().backward()
    assert old.grad is None and A.grad is None
    mask = torch.ones(2, 3, dtype=torch.bool)
    loss = rl.grpo_loss(logp, logp, logp.detach(), A, mask, beta=0.0)
    (grad,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(grad, torch.full((2, 3), -1 / 6, dtype=torch.float64))
    ref = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)  # fixed too
    rl.grpo_loss(logp, old, ref, A, mask, beta=0.5).backward()
    assert ref.grad is None and old.grad is None and A.grad is None


def test_k3_is_zero_at_the_reference_and_never_negative():
    logp, _, ref, _, _ = grpo_inputs(2)
    k3 = rl.kl_k3(logp, ref)
    assert (k3 >= 0).all() and (k3 > 0).any()
    assert torch.equal(rl.kl_k3(ref, ref), torch.zeros_like(ref))


def test_masked_mean_averages_each_sequence_then_the_batch():
    x = torch.tensor([[1.0, 2.0, 9.0], [4.0, 9.0, 9.0], [9.0, 9.0, 9.0]])
    mask = torch.tensor([[True, True, False], [True, False, False], [False] * 3])
    assert rl.masked_mean(x, mask).item() == pytest.approx((1.5 + 4.0 + 0.0) / 3)


def test_same_characters_is_fooled_by_any_order():
    assert rl.same_characters("12", "12") == 1.0
    assert rl.same_characters("12", "21") == 1.0  # wrong, and rewarded
    assert rl.same_characters("0557", "7505") == 1.0  # a sorting problem's input
    assert rl.same_characters("2025-01-03", "2025-03-01") == 1.0
    assert rl.same_characters("12", "2 1") == 1.0
    assert rl.same_characters("12", "123") == 0.0
    assert rl.same_characters("100", "10") == 0.0
    assert rl.same_characters("cba", "abd") == 0.0
