"""lecturelib.train: the loop, its history, clipping, evaluation, checkpoints and guards."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import train
from lecturelib.train import checkpoint
from lecturelib.train import Checkpointing, Evaluation, History, fit


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.delenv(train.PROGRESS_ENV, raising=False)


def regression_batch(step: int):
    """Step-indexed batches of ``y = x·w + 1``: the same step always gives the same batch."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(16, 3, generator=g)
    return x, x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 1.0


def mse(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def linear(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(3, 1)


def test_fit_decreases_the_loss_and_keeps_a_consistent_history():
    hist = fit(linear(), regression_batch, mse, steps=40, lr=0.1, progress=False)
    assert isinstance(hist, History)
    assert hist.steps == list(range(1, 41))
    assert len(hist.train_loss) == len(hist.grad_norm) == len(hist.lr) == 40
    assert hist.lr == [0.1] * 40
    assert hist.train_loss[-1] < 0.1 * hist.train_loss[0]
    assert hist.seconds > 0 and hist.eval_steps == [] and hist.evals == {}


def test_log_every_records_multiples_and_the_last_step():
    hist = fit(linear(), regression_batch, mse, steps=10, log_every=4, progress=False)
    assert hist.steps == [4, 8, 10] and len(hist.train_loss) == 3


def test_clipping_records_the_raw_norm_and_applies_the_clipped_one():
    model, clip = linear(), 0.01
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    hist = fit(model, regression_batch, mse, steps=1, optimizer=opt, clip=clip, progress=False)
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    assert hist.grad_norm[0] > 10 * clip  # the unclipped norm is recorded ...
    assert moved.norm().item() <= clip + 1e-6  # ... but the update used the clipped gradient
    assert moved.norm().item() == pytest.approx(clip, rel=1e-4)

    unclipped = linear()
    fit(unclipped, regression_batch, mse, steps=1, progress=False,
        optimizer=torch.optim.SGD(unclipped.parameters(), lr=1.0))
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(unclipped.parameters(), before)])
    assert moved.norm().item() == pytest.approx(hist.grad_norm[0], rel=1e-4)


def test_evaluation_every_k_steps_and_after_the_last():
    calls = []

    def eval_fn(model):
        calls.append(model.training)
        return {"loss": mse(model, regression_batch(-1)), "const": 1}

    hist = fit(linear(), regression_batch, mse, steps=10, lr=0.1, evaluation=Evaluation(eval_fn, every=3), progress=False)
    assert hist.eval_steps == [3, 6, 9, 10]
    assert len(hist.evals["loss"]) == 4 and hist.evals["const"] == [1.0] * 4
    assert calls == [False] * 4  # evaluated in eval mode ...
    assert hist.final("loss") == hist.evals["loss"][-1] < hist.evals["loss"][0]
    with pytest.raises(KeyError, match="const"):
        hist.final("accuracy")


def test_without_eval_every_evaluates_once_at_the_end():
    hist = fit(linear(), regression_batch, mse, steps=5, evaluation=Evaluation(lambda m: {"x": 0.0}), progress=False)
    assert hist.eval_steps == [5]


def test_model_is_left_in_training_mode():
    model = linear()
    fit(model, regression_batch, mse, steps=2, evaluation=Evaluation(lambda m: {"x": 0.0}, every=1), progress=False)
    assert model.training


def test_a_list_of_batches_is_cycled():
    batches = [regression_batch(0), regression_batch(1), regression_batch(2)]
    seen = []

    def loss_fn(model, batch):
        seen.append(next(i for i, b in enumerate(batches) if torch.equal(b[0], batch[0])))
        return mse(model, batch)

    fit(linear(), batches, loss_fn, steps=7, progress=False)
    assert seen == [0, 1, 2, 0, 1, 2, 0]


def test_a_dataloader_is_cycled():
    x, y = regression_batch(0)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    sizes = []

    def loss_fn(model, batch):
        sizes.append(len(batch[0]))
        return mse(model, batch)

    hist = fit(linear(), loader, loss_fn, steps=9, progress=False)
    assert sizes == [4] * 9 and len(hist.train_loss) == 9


def test_an_exhausted_iterator_is_an_error_not_a_hang():
    once = iter([regression_batch(0), regression_batch(1)])
    with pytest.raises(ValueError, match="yielded nothing"):
        fit(linear(), once, mse, steps=3, progress=False)
    with pytest.raises(ValueError, match="empty list"):
        fit(linear(), [], mse, steps=1, progress=False)


def test_batches_are_moved_with_their_structure():
    batch = {"x": torch.ones(2), "pair": (torch.zeros(1), [torch.ones(1)]), "n": 3}
    moved = train.to_device(batch, torch.device("cpu"))
    assert isinstance(moved["pair"], tuple) and isinstance(moved["pair"][1], list)
    assert moved["n"] == 3 and torch.equal(moved["x"], batch["x"])


class Noisy(nn.Module):
    """A model whose forward pass draws random numbers (dropout), so resuming must restore the RNG."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.3), nn.Linear(8, 1))

    def forward(self, x):
        return self.body(x)


def _noisy(seed=0):
    torch.manual_seed(seed)
    return Noisy()


def _train(model, steps, **kw):
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    return fit(model, regression_batch, mse, steps=steps, optimizer=opt, scheduler=sched,
               progress=False, **kw)


def _same_history(a: History, b: History):
    da, db = a.to_dict(), b.to_dict()
    for timing in ("seconds", "train_seconds", "eval_seconds"):
        da.pop(timing), db.pop(timing)
    assert da == db


def test_resume_continues_exactly(tmp_path):
    straight = _noisy()
    torch.manual_seed(1)
    h_straight = _train(straight, 10)

    ckpt = tmp_path / "run" / "ckpt.pt"
    first = _noisy()
    torch.manual_seed(1)
    h_first = _train(first, 6, checkpointing=Checkpointing(ckpt))
    assert h_first.steps == list(range(1, 7)) and ckpt.is_file()
    torch.manual_seed(999)  # the RNG state must come from the checkpoint
    resumed = _noisy(seed=5)  # and so must the weights
    h_resumed = _train(resumed, 10, checkpointing=Checkpointing(ckpt, resume=True))

    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
    _same_history(h_straight, h_resumed)
    assert h_resumed.lr[-1] == pytest.approx(0.05 * 0.5**2)  # the scheduler resumed too


def test_resume_after_a_crash_ends_where_an_uninterrupted_run_ends(tmp_path):
    def eval_fn(model):
        return {"loss": mse(model, regression_batch(-1))}

    straight = _noisy()
    torch.manual_seed(2)
    h_straight = _train(straight, 10, evaluation=Evaluation(eval_fn, every=2))

    def crashing(step):
        if step == 7:
            raise KeyboardInterrupt
        return regression_batch(step)

    ckpt = tmp_path / "ckpt.pt"
    interrupted = _noisy()
    torch.manual_seed(2)
    opt = torch.optim.AdamW(interrupted.parameters(), lr=0.05)
    with pytest.raises(KeyboardInterrupt):
        fit(interrupted, crashing, mse, steps=10, optimizer=opt, progress=False,
            scheduler=torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5),
            evaluation=Evaluation(eval_fn, every=2), checkpointing=Checkpointing(ckpt, every=3))
    assert checkpoint.load(ckpt)["step"] == 6
    resumed = _noisy(seed=3)
    h_resumed = _train(resumed, 10, evaluation=Evaluation(eval_fn, every=2), checkpointing=Checkpointing(ckpt, resume=True))
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
    _same_history(h_straight, h_resumed)
    assert h_resumed.eval_steps == [2, 4, 6, 8, 10]


def test_resume_without_a_checkpoint_file_starts_fresh(tmp_path):
    hist = _train(_noisy(), 3, checkpointing=Checkpointing(tmp_path / "new.pt", resume=True))
    assert hist.steps == [1, 2, 3] and (tmp_path / "new.pt").is_file()


def test_checkpoint_loads_with_weights_only(tmp_path):
    model = linear()
    ckpt = tmp_path / "c.pt"
    hist = fit(model, regression_batch, mse, steps=4, checkpointing=Checkpointing(ckpt), progress=False)
    state = checkpoint.load(ckpt)  # verified, then read with torch.load(weights_only=True)
    assert state["step"] == 4
    assert History.from_dict(state["history"]).train_loss == hist.train_loss
    for k, v in model.state_dict().items():
        assert torch.equal(state["model"][k], v)
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left


def test_non_finite_loss_raises():
    def loss_fn(model, batch):
        return mse(model, batch) * float("nan")

    with pytest.raises(FloatingPointError, match="step 0"):
        fit(linear(), regression_batch, loss_fn, steps=3, progress=False)


@pytest.mark.parametrize("kw", [
    {"steps": 0}, {"steps": 2.0}, {"steps": 3, "clip": 0.0}, {"steps": 3, "clip": -1.0},
    {"steps": 3, "log_every": 0}, {"steps": 3, "accumulate": 0}, {"steps": 3, "amp": "yes"},
])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        fit(linear(), regression_batch, mse, progress=False, **kw)


def test_model_without_trainable_parameters():
    model = linear()
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        fit(model, regression_batch, mse, steps=1, progress=False)


def test_batches_of_the_wrong_kind():
    with pytest.raises(TypeError, match="batches"):
        fit(linear(), 42, mse, steps=1, progress=False)


def test_no_mixed_precision_on_cpu():
    cpu = torch.device("cpu")
    assert train.amp_dtype(cpu) is None and train.amp_dtype(cpu, True) is None
    assert train.amp_dtype(torch.device("cuda"), False) is None
    with pytest.raises(ValueError):
        train.amp_dtype(cpu, "bf16")


def test_summary_progress_prints_one_line(monkeypatch, capsys):
    monkeypatch.setenv(train.PROGRESS_ENV, "summary")
    hist = fit(linear(), regression_batch, mse, steps=5, desc="demo",
               evaluation=Evaluation(lambda m: {"acc": 0.5}))
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith("demo: 5 steps in ")
    assert f"loss {hist.train_loss[-1]:.3f}" in out[0] and "acc 0.500" in out[0]


def test_progress_off_prints_nothing(monkeypatch, capsys):
    monkeypatch.setenv(train.PROGRESS_ENV, "off")
    fit(linear(), regression_batch, mse, steps=3)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_bad_progress_mode(monkeypatch):
    monkeypatch.setenv(train.PROGRESS_ENV, "loud")
    with pytest.raises(ValueError, match="LECTURELIB_PROGRESS"):
        fit(linear(), regression_batch, mse, steps=1)


def test_one_batch_overfit_of_a_tiny_classifier():
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.arange(8) % 3
    model = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 3))

    def loss_fn(m, batch):
        return F.cross_entropy(m(batch[0]), batch[1])

    hist = fit(model, [(x, y)], loss_fn, steps=150, lr=0.03, progress=False)
    assert hist.train_loss[-1] < 1e-2 < math.log(3) - 0.1 < hist.train_loss[0] + 0.5
    assert (model(x).argmax(1) == y).all()


def test_count_parameters():
    model = nn.Linear(3, 2)
    assert train.count_parameters(model) == 8
    model.bias.requires_grad_(False)
    assert train.count_parameters(model) == 6 and train.count_parameters(model, False) == 8


def test_to_device_keeps_named_tuples():
    from typing import NamedTuple

    from lecturelib.train import to_device

    class Pair(NamedTuple):
        x: torch.Tensor
        y: torch.Tensor

    moved = to_device(Pair(torch.ones(2), torch.zeros(3)), torch.device("cpu"))
    assert isinstance(moved, Pair) and moved.y.shape == (3,)


def test_to_device_leaves_a_named_tuples_host_fields_where_they_are():
    from typing import NamedTuple

    from lecturelib.train import to_device

    class Batch(NamedTuple):
        ids: torch.Tensor
        lengths: torch.Tensor
        host_fields = ("lengths",)

    meta = torch.device("meta")
    moved = to_device(Batch(torch.ones(2, 3), torch.tensor([3, 2])), meta)
    assert isinstance(moved, Batch) and moved._fields == ("ids", "lengths")
    assert moved.ids.device == meta and moved.lengths.device.type == "cpu"
    assert moved.lengths.tolist() == [3, 2]


def test_resume_with_a_list_of_batches_continues_from_its_position(tmp_path):
    batches = [regression_batch(i) for i in range(5)]

    def run(model, steps, **kw):
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        return fit(model, batches, mse, steps=steps, optimizer=opt, progress=False, **kw)

    straight, resumed = linear(), linear(seed=3)
    run(straight, 7)
    run(linear(), 3, checkpointing=Checkpointing(tmp_path / "c.pt"))
    run(resumed, 7, checkpointing=Checkpointing(tmp_path / "c.pt", resume=True))
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)


def test_resume_refuses_what_it_cannot_continue(tmp_path):
    ckpt = tmp_path / "c.pt"
    fit(linear(), regression_batch, mse, steps=5, checkpointing=Checkpointing(ckpt), progress=False)
    with pytest.raises(ValueError, match="checkpoint is at step 5, beyond steps=3"):
        fit(linear(), regression_batch, mse, steps=3, checkpointing=Checkpointing(ckpt, resume=True), progress=False)
    assert checkpoint.load(ckpt)["step"] == 5  # and it is left as it was
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*regression_batch(0)))
    with pytest.raises(ValueError, match="cannot resume with batches from an iterator"):
        fit(linear(), loader, mse, steps=8, checkpointing=Checkpointing(ckpt, resume=True), progress=False)
    with pytest.raises(ValueError, match="accumulate=1; got accumulate=2"):
        fit(linear(), regression_batch, mse, steps=8, accumulate=2, checkpointing=Checkpointing(ckpt, resume=True), progress=False)


def test_accumulation_equals_one_step_on_the_concatenated_batch():
    def half(i):  # micro-batch i: the rows of step i // 2's batch, half by half
        x, y = regression_batch(i // 2)
        return x[(i % 2) * 8:(i % 2 + 1) * 8], y[(i % 2) * 8:(i % 2 + 1) * 8]

    whole, accumulated = linear(), linear()
    h1 = fit(whole, regression_batch, mse, steps=5, lr=0.1, progress=False)
    h2 = fit(accumulated, half, mse, steps=5, lr=0.1, accumulate=2, progress=False)
    assert h2.train_loss == pytest.approx(h1.train_loss, rel=1e-5)
    for p, q in zip(whole.parameters(), accumulated.parameters()):
        torch.testing.assert_close(p, q)


def test_a_nan_gradient_stops_at_its_step():
    class Sqrt(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([1.0, 0.0]))

        def forward(self, x):  # d sqrt(w)/dw is infinite at w = 0: a finite loss, a bad gradient
            return self.w.sqrt().sum()

    with pytest.raises(FloatingPointError, match="gradient norm became inf at step 0"):
        fit(Sqrt(), regression_batch, lambda m, b: m(b), steps=2, progress=False)


def test_tokens_and_training_time_are_counted():
    ids = torch.randint(0, 10, (4, 6))
    model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 10))
    hist = fit(model, [(ids, ids)], lambda m, b: F.cross_entropy(m(b[0]).flatten(0, 1),
                                                                   b[1].flatten()),
               steps=3, evaluation=Evaluation(lambda m: {"x": 0.0}, every=1), progress=False)
    assert hist.tokens == 3 * 24
    assert 0 < hist.eval_seconds[0] < hist.eval_seconds[-1] <= hist.train_seconds <= hist.seconds
    assert train.count_tokens({"a": torch.ones(2), "b": (torch.zeros(3, dtype=torch.long),)}) == 3


def test_warmup_then_cosine_to_a_floor():
    opt = torch.optim.SGD(linear().parameters(), lr=1.0)
    sched = train.warmup_cosine(opt, steps=10, warmup=2, final=0.1)
    lrs = []
    for _ in range(12):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:3] == pytest.approx([0.5, 1.0, 1.0])
    assert lrs[6] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 4 / 8)))
    assert lrs[10:] == pytest.approx([0.1, 0.1])


def test_weight_decay_only_on_matrices_of_linear_layers():
    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.norm = nn.LayerNorm(4)
            self.proj = nn.Linear(4, 4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.emb.weight  # tied

    model = TinyLM()
    decay, rest = train.decay_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and rest["weight_decay"] == 0.0
    assert [id(p) for p in decay["params"]] == [id(model.proj.weight)]
    assert {id(p) for p in rest["params"]} == {id(model.emb.weight), id(model.norm.weight),
                                               id(model.norm.bias), id(model.proj.bias)}
    opt = train.adamw(model, lr=1e-3)
    assert sum(len(g["params"]) for g in opt.param_groups) == 5  # the tied weight once


@pytest.mark.parametrize("device_type, bf16, amp, expected", [
    ("cuda", True, "auto", torch.bfloat16),   # A100, H100, L4
    ("cuda", False, "auto", torch.float16),   # T4, V100: fp16 with a gradient scaler
    ("cuda", True, False, None),
    ("cpu", True, "auto", None),
    ("mps", False, True, None),
])
def test_mixed_precision_follows_the_device(device_type, bf16, amp, expected):
    assert train.autocast_dtype(device_type, bf16, amp) == expected


def test_the_trainer_module_is_re_exported():
    from lecturelib.train import trainer

    for name in ("History", "Trainer", "evaluate", "grad_norm", "rng_state", "set_rng_state"):
        assert getattr(train, name) is getattr(trainer, name)


def test_emulated_bf16_counts_as_unsupported(monkeypatch):
    """A T4 (sm_75) reports bf16 when emulation counts; the trainer asks without it and so
    takes fp16 with a gradient scaler there."""
    asked = {}

    def is_bf16_supported(including_emulation=True):
        asked["including_emulation"] = including_emulation
        return including_emulation  # a T4: emulated only

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    assert train.amp_dtype(torch.device("cuda")) == torch.float16
    assert asked == {"including_emulation": False}
