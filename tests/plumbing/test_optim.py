"""lecturelib.train.optim: Muon for the matrices + AdamW for the rest, stepped and scheduled as one."""

from __future__ import annotations

import pytest
import torch

from lecturelib import train
from lecturelib.pretraining import gpt
from lecturelib.recurrence import lm
from lecturelib.train import optim


def tiny_gpt(seed: int = 0) -> gpt.GPT:
    torch.manual_seed(seed)
    return gpt.GPT(
        gpt.GPTConfig(vocab_size=11, seq_len=16, d_model=32, n_layers=2, n_heads=4)
    )


def test_muon_takes_the_matrices_and_adamw_the_rest():
    model = tiny_gpt()
    opt = optim.muon_adamw(model, 1e-2)
    muon, adamw = opt.optimizers["muon"], opt.optimizers["adamw"]
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    in_muon = {id(p) for g in muon.param_groups for p in g["params"]}
    assert in_muon == {id(p) for p in optim.decay_groups(model, 0.1)[0]["params"]}
    assert all(p.dim() == 2 for g in muon.param_groups for p in g["params"])
    assert model.embed.weight in adamw.param_groups[0]["params"]
    assert len(opt.param_groups) == 2


def test_one_schedule_sets_the_rate_of_both():
    opt = optim.muon_adamw(tiny_gpt(), 1e-2)
    sched = train.warmup_cosine(opt, 10, warmup=4)
    assert [g["lr"] for g in opt.optimizers["muon"].param_groups] == [2.5e-3]
    for _ in range(4):
        opt.step()
        sched.step()
    assert opt.optimizers["adamw"].param_groups[0]["lr"] == pytest.approx(1e-2)
    assert opt.optimizers["muon"].param_groups[0]["lr"] == pytest.approx(1e-2)


def test_it_trains_and_resumes_exactly(tmp_path):
    batches = gpt.windows(torch.arange(300) % 11, 4, 16)  # periodic: learnable

    def run(steps, **kw):
        model = tiny_gpt()
        opt = optim.muon_adamw(model, 1e-2)
        sched = train.warmup_cosine(opt, 12, warmup=2)
        hist = train.fit(
            model,
            batches,
            lm.next_token_loss,
            steps=steps,
            optimizer=opt,
            scheduler=sched,
            progress=False,
            **kw,
        )
        return model, hist

    straight, hist = run(12)
    assert hist.train_loss[-1] < hist.train_loss[0] - 0.3
    run(6, checkpointing=train.Checkpointing(tmp_path / "c.pt"))
    resumed, _ = run(
        12, checkpointing=train.Checkpointing(tmp_path / "c.pt", resume=True)
    )
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)


def test_bad_input():
    with pytest.raises(TypeError, match="Combined needs one or more named torch.optim"):
        optim.Combined(a="adam")
    with pytest.raises(
        ValueError, match=r"lr must be a finite number in \(0, inf\); got int 0"
    ):
        optim.muon_adamw(tiny_gpt(), 0)
    opt = optim.muon_adamw(tiny_gpt(), 1e-2)
    with pytest.raises(
        ValueError,
        match=r"state_dict holds optimizers \['adamw'\]; this one "
        r"has \['adamw', 'muon'\]",
    ):
        opt.load_state_dict({"adamw": {}})


def grads_of(model, seed=1):
    torch.manual_seed(seed)
    x = torch.randint(0, 11, (2, 16))
    model.zero_grad()
    lm.next_token_loss(model, (x, x)).backward()


@pytest.mark.parametrize("shape", [(), (1,)])
@pytest.mark.parametrize("overflow", [False, True])
def test_a_scaler_aware_step_equals_a_step_or_none(overflow, shape):
    """fp16's GradScaler hands `Combined` the overflow flag as a tensor: with the flag
    clear the step equals a plain one; with it set nothing changes (Muon's step undone on
    the device, AdamW's too), as GradScaler's skipped step, which reads the flag back."""
    stepped, guarded = tiny_gpt(), tiny_gpt()
    plain, aware = optim.muon_adamw(stepped, 1e-2), optim.muon_adamw(guarded, 1e-2)
    for _ in range(2):  # the second step with state from the first
        grads_of(stepped), grads_of(guarded)
        plain.step()
        before = [p.detach().clone() for p in guarded.parameters()]
        aware.grad_scale = None
        aware.found_inf = torch.full(shape, float(overflow))
        aware.step()
        del aware.grad_scale, aware.found_inf
        if overflow:
            assert all(torch.equal(p, q) for p, q in zip(guarded.parameters(), before))
        else:
            assert all(
                torch.equal(p, q)
                for p, q in zip(guarded.parameters(), stepped.parameters())
            )
    if overflow:  # two skipped steps leave a fresh optimizer's state: zeros
        assert all(
            not t.any()
            for o in aware.optimizers.values()
            for s in o.state.values()
            for t in s.values()
        )


def test_a_scaler_aware_step_unscales_gradients_it_is_given_scaled():
    stepped, guarded = tiny_gpt(), tiny_gpt()
    plain, aware = optim.muon_adamw(stepped, 1e-2), optim.muon_adamw(guarded, 1e-2)
    grads_of(stepped), grads_of(guarded)
    for p in guarded.parameters():
        p.grad.mul_(1024.0)
    plain.step()
    aware.grad_scale, aware.found_inf = torch.tensor(1024.0), torch.tensor(0.0)
    aware.step()
    for p, q in zip(guarded.parameters(), stepped.parameters()):
        torch.testing.assert_close(p, q)
