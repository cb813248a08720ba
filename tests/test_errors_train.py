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
    (lambda: fit(model="net"), TypeError, r"model must be a torch.nn.Module; got str"),
    (lambda: fit(steps=0), ValueError, r"steps must be a positive int; got 0"),
    (lambda: fit(steps=2.0), ValueError, r"steps must be a positive int; got 2.0"),
    (lambda: fit(steps=True), ValueError, r"steps must be a positive int; got True"),
    (lambda: fit(accumulate=0), ValueError, r"accumulate must be a positive int; got 0"),
    (lambda: fit(log_every=0), ValueError, r"log_every must be a positive int; got 0"),
    (lambda: fit(eval_every=0, eval_fn=lambda m: {}), ValueError,
     r"eval_every must be a positive int; got 0"),
    (lambda: fit(eval_every=2), ValueError, r"eval_every is set but there is no eval_fn"),
    (lambda: fit(checkpoint_every=0, checkpoint="c.pt"), ValueError,
     r"checkpoint_every must be a positive int; got 0"),
    (lambda: fit(checkpoint_every=2), ValueError, r"checkpoint_every is set but there is no"),
    (lambda: fit(clip=0.0), ValueError, r"clip must be a positive, finite gradient norm"),
    (lambda: fit(clip=float("nan")), ValueError, r"clip must be a positive, finite .*nan"),
    (lambda: fit(clip="1"), ValueError, r"clip must be a positive, finite .*'1'"),
    (lambda: fit(resume=True), ValueError, r"resume=True needs a checkpoint path"),
    (lambda: fit(amp="bf16"), ValueError, r"amp must be True, False or 'auto'; got 'bf16'"),
    (lambda: fit(checkpoint=3), TypeError, r"checkpoint must be a file path .*; got int"),
    (lambda: fit(model=frozen()), ValueError, r"the model has no trainable parameters"),
    (lambda: fit(batches=42), TypeError, r"batches must be a function step -> batch.*got int"),
    (lambda: fit(batches=[]), ValueError, r"batches is an empty list"),
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
