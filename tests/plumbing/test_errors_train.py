"""Bad input to lecturelib.train: the error and its message."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import train


def batch(step):
    return torch.ones(4, 3), torch.zeros(4, 1)


def mse(model, b):
    return F.mse_loss(model(b[0]), b[1])


def fit(**kw):
    args = {"model": nn.Linear(3, 1), "batches": batch, "loss_fn": mse, "steps": 2,
            "progress": False}
    args.update(kw)
    return train.fit(args.pop("model"), args.pop("batches"), args.pop("loss_fn"), **args)


def frozen():
    m = nn.Linear(3, 1)
    m.requires_grad_(False)
    return m


CASES = [
    (lambda: fit(model="net"), TypeError, r"model must be a torch.nn.Module; got str 'net'"),
    (lambda: fit(steps=0), ValueError, r"steps must be an int >= 1; got int 0"),
    (lambda: fit(steps=2.0), ValueError, r"steps must be an int >= 1; got float 2.0"),
    (lambda: fit(steps=True), ValueError, r"steps must be an int >= 1; got bool True"),
    (lambda: fit(accumulate=0), ValueError, r"accumulate must be an int >= 1; got int 0"),
    (lambda: fit(log_every=0), ValueError, r"log_every must be an int >= 1; got int 0"),
    (lambda: train.Evaluation(lambda m: {}, every=0), ValueError,
     r"Evaluation.every must be an int >= 1; got int 0"),
    (lambda: train.Evaluation("val_loss"), TypeError,
     r"Evaluation.fn must be callable; got str 'val_loss'"),
    (lambda: fit(evaluation=lambda m: {}), TypeError,
     r"evaluation must be a train.Evaluation or None; got function"),
    (lambda: train.Checkpointing("c.pt", every=0), ValueError,
     r"Checkpointing.every must be an int >= 1; got int 0"),
    (lambda: train.Checkpointing("c.pt", resume="yes"), TypeError,
     r"Checkpointing.resume must be a bool; got str 'yes'"),
    (lambda: fit(checkpointing="c.pt"), TypeError,
     r"checkpointing must be a train.Checkpointing or None; got str 'c.pt'"),
    (lambda: fit(clip=0.0), ValueError, r"clip must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: fit(clip=float("nan")), ValueError, r"clip must be a finite number in \(0, inf\); got float nan"),
    (lambda: fit(clip="1"), ValueError, r"clip must be a finite number in \(0, inf\); got str '1'"),
    (lambda: fit(amp="bf16"), ValueError, r"amp must be True, False or 'auto'; got 'bf16'"),
    (lambda: train.Checkpointing(3), TypeError, r"checkpoint must be a file path .*; got int"),
    (lambda: fit(model=frozen()), ValueError, r"the model has no trainable parameters"),
    (lambda: fit(batches=42), TypeError, r"batches must be a function step -> batch.*got int"),
    (lambda: fit(batches=[]), ValueError, r"batches is an empty list"),
    (lambda: fit(batches=torch.ones(8, 3)), TypeError,
     r"batches must be .*not a tensor \(got torch.float32 tensor of shape \(8, 3\): fit "
     r"would take each row as a batch\); pass \[x\] to train on this one batch"),
    (lambda: fit(batches={"x": torch.ones(4, 3)}), TypeError,
     r"batches must be .*not a dict \(fit would take each key as a batch\); pass \[batch\]"),
    (lambda: fit(batches=iter([])), ValueError, r"batches yielded nothing"),
    (lambda: fit(loss_fn=lambda m, b: (m(b[0]) - b[1]).pow(2)), ValueError,
     r"loss_fn must return a scalar tensor .*got \(4, 1\); reduce .* with .mean\(\)"),
    (lambda: fit(loss_fn=lambda m, b: 0.5), ValueError,
     r"loss_fn must return a scalar tensor .*got float"),
    (lambda: fit(loss_fn=lambda m, b: mse(m, b) * float("inf")), FloatingPointError,
     r"loss became inf at step 0"),
    (lambda: fit(model=nn.Embedding(4, 2, sparse=True), clip=1.0), ValueError,
     r"clip cannot be used with sparse embedding gradients"),
    (lambda: train.History().final("loss"), KeyError, r"no evaluation of 'loss'"),
    (lambda: train.evaluate(nn.Linear(1, 1), lambda m: 1.0), TypeError,
     r"eval_fn must return a dict of metric -> number; got float"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message, monkeypatch):
    monkeypatch.delenv("LECTURELIB_PROGRESS", raising=False)
    with pytest.raises(error, match=message):
        call()
