"""lecturelib.posttraining.preference: Bradley–Terry recovers known scores, the reward
model reads the final token, DPO equals TRL's loss with the analytic gradient, and the
KL estimators are unbiased."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lecturelib.posttraining import preference
from lecturelib.pretraining import gpt


def tiny_gpt() -> gpt.GPT:
    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=9, seq_len=12, d_model=16, n_layers=2, n_heads=2)
    return gpt.GPT(config)


def test_bradley_terry_loss_is_the_negative_log_likelihood_of_the_preferences():
    r_c, r_r = torch.tensor([0.0, 2.0, -1.0]), torch.tensor([0.0, 0.0, 1.0])
    expected = -(torch.sigmoid(r_c - r_r)).log().mean()
    torch.testing.assert_close(preference.bradley_terry_loss(r_c, r_r), expected)
    assert math.isclose(
        preference.bradley_terry_loss(r_c[:1], r_r[:1]).item(),
        math.log(2),
        rel_tol=1e-6,
    )


def test_bradley_terry_maximum_likelihood_recovers_known_scores():
    g = torch.Generator().manual_seed(0)
    scores = torch.tensor([-1.5, -0.5, 0.0, 0.7, 1.3])
    i = torch.randint(0, 5, (20_000,), generator=g)
    j = (i + torch.randint(1, 5, (20_000,), generator=g)) % 5  # another item
    i_wins = torch.rand(20_000, generator=g) < torch.sigmoid(scores[i] - scores[j])
    chosen, rejected = torch.where(i_wins, i, j), torch.where(i_wins, j, i)
    theta = torch.zeros(5, requires_grad=True)
    opt = torch.optim.LBFGS([theta], max_iter=30, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = preference.bradley_terry_loss(theta[chosen], theta[rejected])
        loss.backward()
        return loss

    opt.step(closure)
    fitted = theta.detach() - theta.detach().mean()  # scores are known up to a shift
    torch.testing.assert_close(fitted, scores - scores.mean(), atol=0.08, rtol=0)
    wrong = preference.bradley_terry_loss(-theta[chosen], -theta[rejected])
    assert wrong > closure()  # the reversed ranking explains the data worse


def test_reward_model_reads_the_final_norm_at_the_last_token():
    body = tiny_gpt()
    rm = preference.RewardModel(body)
    ids = torch.randint(0, 9, (3, 7), generator=torch.Generator().manual_seed(1))
    assert torch.equal(rm(ids), torch.zeros(3))  # a zero head: every reward starts at 0
    torch.nn.init.normal_(rm.score.weight)
    h = body.norm(body.residual_stream(ids)[-1])  # (b, t, d)
    torch.testing.assert_close(rm(ids), rm.score(h[:, -1]).squeeze(-1))
    last = torch.tensor([2, 6, 4])
    torch.testing.assert_close(rm(ids, last), rm.score(h[torch.arange(3), last])[:, 0])
    changed = ids.clone()
    changed[0, 3:] = (changed[0, 3:] + 1) % 9  # tokens after row 0's last one
    torch.testing.assert_close(rm(changed, last)[0], rm(ids, last)[0])
    assert not torch.allclose(rm(changed)[0], rm(ids)[0])


def test_reward_model_learns_a_preference_batch():
    rm = preference.RewardModel(tiny_gpt())
    g = torch.Generator().manual_seed(2)
    chosen, rejected = torch.randint(0, 9, (2, 8, 6), generator=g)
    opt = torch.optim.Adam(rm.parameters(), lr=3e-3)  # at 1e-2 the loss bounces near 0.1
    for _ in range(150):
        loss = preference.bradley_terry_loss(rm(chosen), rm(rejected))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert (rm(chosen) > rm(rejected)).all()


def trl_dpo_loss(pi_c, pi_r, ref_c, ref_r, beta, label_smoothing=0.0):
    """TRL's ``DPOTrainer.dpo_loss`` with ``loss_type="sigmoid"`` (trl/trainer/
    dpo_trainer.py): ``logits = (pi_c − pi_r) − (ref_c − ref_r)``, per-pair losses
    ``−logsigmoid(β·logits)·(1 − ls) − logsigmoid(−β·logits)·ls``, rewards
    ``β(logps − ref_logps).detach()``; the trainer averages the losses."""
    logits = (pi_c - pi_r) - (ref_c - ref_r)
    losses = (
        -F.logsigmoid(beta * logits) * (1 - label_smoothing)
        - F.logsigmoid(-beta * logits) * label_smoothing
    )
    chosen_rewards = beta * (pi_c - ref_c).detach()
    rejected_rewards = beta * (pi_r - ref_r).detach()
    return losses.mean(), chosen_rewards, rejected_rewards


def logps(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [-20 * torch.rand(16, generator=g, dtype=torch.float64) for _ in range(4)]


def test_dpo_loss_equals_trls_sigmoid_loss_with_detached_rewards():
    pi_c, pi_r, ref_c, ref_r = logps(0)
    pi_c.requires_grad_(True)
    pi_r.requires_grad_(True)
    for beta in (0.1, 0.5, 2.0):
        ours = preference.dpo_loss(pi_c, pi_r, ref_c, ref_r, beta)
        theirs = trl_dpo_loss(pi_c, pi_r, ref_c, ref_r, beta)
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b)
        assert ours[0].requires_grad
        assert not ours[1].requires_grad and not ours[2].requires_grad
    accuracy = (ours[1] > ours[2]).float().mean()
    assert 0 < accuracy < 1  # random log-probs: some pairs each way


def test_dpo_gradient_is_beta_sigmoid_of_minus_the_reward_margin():
    pi_c, pi_r, ref_c, ref_r = logps(1)
    pi_c.requires_grad_(True)
    pi_r.requires_grad_(True)
    beta, b = 0.3, len(pi_c)
    loss, chosen, rejected = preference.dpo_loss(pi_c, pi_r, ref_c, ref_r, beta)
    loss.backward()
    weight = beta * torch.sigmoid(-(chosen - rejected)) / b  # σ(−βΔ)·β, mean over b
    torch.testing.assert_close(pi_c.grad, -weight)
    torch.testing.assert_close(pi_r.grad, weight)


def test_dpo_starts_at_log_two_with_zero_rewards_when_the_policy_is_the_reference():
    pi_c, pi_r, _, _ = logps(2)
    loss, chosen, rejected = preference.dpo_loss(pi_c, pi_r, pi_c, pi_r, 0.1)
    assert math.isclose(loss.item(), math.log(2), rel_tol=1e-12)
    assert torch.equal(chosen, torch.zeros(16, dtype=torch.float64))
    assert torch.equal(rejected, chosen)


def test_sequence_kl_estimators_are_unbiased_on_a_categorical():
    g = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    q = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    exact = (p * (p / q).log()).sum()
    y = torch.multinomial(p, 200_000, replacement=True, generator=g)
    logp, ref = p.log()[y], q.log()[y]
    for estimator in ("k1", "k3"):
        kl = preference.sequence_kl(logp, ref, estimator)
        torch.testing.assert_close(kl, exact, atol=0.01, rtol=0)
    per_sample_k3 = [
        preference.sequence_kl(logp[i : i + 1], ref[i : i + 1], "k3") for i in range(50)
    ]
    assert min(per_sample_k3) >= 0
    assert preference.sequence_kl(logp[:50], logp[:50], "k1") == 0
