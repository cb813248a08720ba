"""Bad input to lecturelib.train.distributed: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.train import distributed

CASES = [
    (lambda: distributed.Distributed(1, 2).shard(torch.ones(3, 2)), ValueError,
     r"a batch of 3 rows cannot be split evenly over 2 processes; use a multiple of 2"),
    (lambda: distributed.Distributed(0, 4).shard({"x": (torch.ones(6),)}), ValueError,
     r"a batch of 6 rows cannot be split evenly over 4 processes"),
    (lambda: distributed.Distributed(0, 2).shard((torch.ones(4), ["a", "b", "c"])),
     ValueError, r"a list of 3 per-row values cannot be split evenly over 2 processes; "
     r"use a multiple of 2"),
    (lambda: distributed.Distributed(2, 2), ValueError, r"rank must be an int in 0\.\.1; got int 2"),
    (lambda: distributed.Distributed(0, 0), ValueError,
     r"world must be an int >= 1; got int 0"),
    (lambda: distributed.init("mpi"), ValueError,
     r"backend must be .nccl., .gloo. or None \(choose\); got .mpi."),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")  # as under torchrun; read by distributed.init
    with pytest.raises(error, match=message):
        call()
