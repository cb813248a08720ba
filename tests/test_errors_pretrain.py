"""Bad input to lecturelib.pretraining.pretrain: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import gpt, pretrain

def tiny():
    return gpt.GPT(gpt.GPTConfig(vocab_size=7, seq_len=8, d_model=16, n_layers=1, n_heads=2))


CASES = [
    (lambda: pretrain.model_path("laptop"), ValueError,
     r"profile must be one of \['cpu', 'gpu', 'nanogpt', 'smoke'\]; got 'laptop'"),
    (lambda: pretrain.train_gpt({"steps": 3}, 7, torch.arange(50), torch.arange(50)), TypeError,
     r"recipe must be a Recipe; got dict"),
    (lambda: pretrain.optimizer(tiny(), pretrain.Recipe(optimizer="sgd")), ValueError,
     r"recipe.optimizer must be 'adamw' or 'muon'; got 'sgd'"),
    (lambda: pretrain.save_pretrained("cpu", tiny(), None), ValueError,
     r"model's config is not the cpu recipe's"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
