"""lecturelib.efficiency.diffusion_lm: the either-way task, the diffusion loss and unmasking, the
autoregressive baseline, and Parallel WaveNet's flow, teacher and reverse KL."""

from __future__ import annotations

import math

import torch

from lecturelib import train
from lecturelib.efficiency import diffusion_lm as dl
from lecturelib.pretraining import bert, gpt


def denoiser(L: int = 4) -> bert.BERT:
    torch.manual_seed(0)
    return bert.BERT(bert.BERTConfig(vocab_size=11, max_len=2 * L + 1, d_model=16,
                                     n_heads=2, n_layers=1))


def test_either_way_pairs_are_sorted_up_or_down_and_both_occur():
    prompt, answer = dl.either_way_pairs(200, 5, seed=3)
    assert prompt.shape == (200, 6) and answer.shape == (200, 5)
    assert dl.sorted_either_way(answer, prompt).all()
    up = (answer[:, 1:] >= answer[:, :-1]).all(1)
    down = (answer[:, 1:] <= answer[:, :-1]).all(1)
    assert up.any() and down.any() and (up | down).all()
    mixed = torch.cat([answer[:, :2], answer[:, 2:].flip(1)], 1)
    strict = answer[:, 0] != answer[:, -1]
    assert not dl.sorted_either_way(mixed, prompt)[strict & (answer[:, 1] != answer[:, 3])
                                                    ].all()


def test_unmask_fills_the_schedule_and_keeps_filled_tokens():
    model = denoiser().eval()
    prompt, _ = dl.either_way_pairs(3, 4, seed=0)
    for steps in (1, 2, 3, 4):
        out, history = dl.unmask(model, prompt, 4, steps)
        assert len(history) == steps and out.shape == (3, 4)
        filled = [(h != dl.mask_id(model)).sum(1) for h in history]
        assert [f[0].item() for f in filled] == [math.ceil(4 * s / steps)
                                                 for s in range(1, steps + 1)]
        for before, after in zip(history, history[1:]):
            kept = before != dl.mask_id(model)
            assert torch.equal(before[kept], after[kept])
        assert (out != dl.mask_id(model)).all()


def test_diffusion_and_ar_losses_fall_with_training():
    L = 4

    def batches(step):
        return dl.either_way_pairs(32, L, seed=step)

    model = denoiser(L)
    g = torch.Generator().manual_seed(0)
    first = dl.diffusion_loss(model, batches(0), g).item()
    train.fit(model, batches, dl.diffusion_loss, steps=40, lr=3e-3, progress=False)
    assert dl.diffusion_loss(model, batches(0), torch.Generator().manual_seed(0)).item() < first
    torch.manual_seed(0)
    ar = gpt.GPT(gpt.GPTConfig(vocab_size=10, seq_len=2 * L + 1, d_model=16, n_heads=2,
                               n_layers=1))
    first = dl.ar_loss(ar, batches(0)).item()
    train.fit(ar, batches, dl.ar_loss, steps=40, lr=3e-3, progress=False)
    assert dl.ar_loss(ar, batches(0)).item() < first
    prompt, answer = batches(1)
    assert dl.ar_generate(ar.eval(), prompt, L).shape == answer.shape
    assert 0.0 <= dl.exact_match(answer, answer) == 1.0


def test_teacher_log_prob_is_the_chain_rule_and_sampling_follows_it():
    x = torch.tensor([[0.3, -1.0, 2.0]])
    mu, log_sigma = dl.teacher_params(x)
    expected = dl.gaussian_log_prob(torch.tensor(0.3), torch.tensor(0.0),
                                    torch.tensor(0.0))
    for i in (1, 2):
        m = 1.5 * math.sin(1.5 * x[0, i - 1].item())
        s = -1.0 + 0.5 * math.tanh(x[0, i - 1].item())
        expected = expected + dl.gaussian_log_prob(x[0, i], torch.tensor(m),
                                                   torch.tensor(s))
    assert torch.allclose(dl.teacher_log_prob(x), expected.view(1), atol=1e-6)
    g = torch.Generator().manual_seed(0)
    samples = dl.teacher_sample(20000, 2, g)
    assert abs(samples[:, 0].mean()) < 0.05 and abs(samples[:, 0].std() - 1) < 0.05
    resid = samples[:, 1] - 1.5 * torch.sin(1.5 * samples[:, 0])
    assert abs(resid.mean()) < 0.02


def test_iaf_density_matches_the_change_of_variables():
    torch.manual_seed(0)
    flow = dl.IAF(3, 8)
    with torch.no_grad():
        flow.w2.normal_(0, 0.3)
    z = torch.randn(3)
    x, log_q = flow(z[None])
    jac = torch.autograd.functional.jacobian(lambda v: flow(v[None])[0][0], z)
    assert torch.allclose(jac.triu(1), torch.zeros(3, 3))    # x_i depends on z_<=i
    base = dl.gaussian_log_prob(z, torch.zeros(3), torch.zeros(3)).sum()
    assert torch.allclose(log_q[0], base - jac.diagonal().abs().log().sum(), atol=1e-5)


def test_distillation_lowers_the_reverse_kl():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    student = dl.IAF(2, 16)
    opt = torch.optim.Adam(student.parameters(), lr=1e-2)
    with torch.no_grad():
        before = dl.reverse_kl(student, 4000, g).item()
    for _ in range(150):
        loss = dl.reverse_kl(student, 256, g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = dl.reverse_kl(student, 4000, g).item()
    assert after < 0.2 * before and after > -0.05   # a KL is >= 0 up to sampling noise
