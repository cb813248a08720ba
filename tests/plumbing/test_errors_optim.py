"""Bad input to lecturelib.train.optim: the error and its message."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lecturelib.train import optim

CASES = [
    (lambda: optim.warmup_cosine(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1), 0), ValueError,
     r"steps must be an int >= 1; got int 0"),
    (lambda: optim.warmup_cosine(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1), 5, 5), ValueError,
     r"need 0 <= warmup < steps; got warmup=5, steps=5"),
    (lambda: optim.warmup_cosine(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1), 5, 1.5), ValueError,
     r"need 0 <= warmup < steps; got warmup=1.5, steps=5"),
    (lambda: optim.warmup_cosine(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1), 5, 1, final=2.0), ValueError,
     r"final \(a fraction of the peak rate\) must be a finite number in \[0, 1\]; got float 2.0"),
    (lambda: optim.decay_groups(nn.Linear(1, 1), -0.1), ValueError,
     r"weight_decay must be a finite number in \[0, inf\); got float -0.1"),
    (lambda: optim.decay_groups(nn.Linear(1, 1), "0.1"), ValueError,
     r"weight_decay must be a finite number in \[0, inf\); got str '0.1'"),
    (lambda: optim.decay_groups("model", 0.1), TypeError,
     r"model must be a torch.nn.Module; got str 'model'"),
    (lambda: optim.adamw(nn.Linear(1, 1), lr=0), ValueError,
     r"lr must be a finite number in \(0, inf\); got int 0"),
    (lambda: optim.muon_adamw(nn.Linear(2, 2), lr=-1.0), ValueError,
     r"lr must be a finite number in \(0, inf\); got float -1.0"),
    (lambda: optim.Combined(), TypeError, r"Combined needs one or more named torch.optim"),
    (lambda: optim.Combined(a=torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1), b="adam"), TypeError,
     r"Combined needs one or more named torch.optim.Optimizer objects; got \['SGD', 'str'\]"),
    (lambda: optim.step_unless("adam", torch.tensor(0.0)), TypeError,
     r"optimizer must be a torch.optim.Optimizer; got str 'adam'"),
    (lambda: optim.step_unless(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1), True),
     TypeError, r"found_inf must be a one-element tensor \(GradScaler's overflow flag\); got bool"),
    (lambda: optim.step_unless(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1),
                               torch.zeros(2)), TypeError,
     r"found_inf must be a one-element tensor"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
