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
    (lambda: pretrain.recipe("laptop"), ValueError,
     r"profile must be one of \['cpu', 'gpu', 'nanogpt', 'smoke'\]; got 'laptop'"),
    (lambda: pretrain.train_gpt({"steps": 3}, 7, torch.arange(50), torch.arange(50)), TypeError,
     r"recipe must be a Recipe; got dict"),
    (lambda: pretrain.Recipe(optimizer="sgd"), ValueError,
     r"recipe.optimizer must be 'adamw' or 'muon'; got 'sgd'"),
    (lambda: pretrain.Recipe(batch_size=0), ValueError,
     r"Recipe.batch_size must be an int >= 1; got int 0"),
    (lambda: pretrain.Recipe(accumulate=2.5), ValueError,
     r"Recipe.accumulate must be an int >= 1; got float 2.5"),
    (lambda: pretrain.Recipe(steps=True), ValueError,
     r"Recipe.steps must be an int >= 1; got bool True"),
    (lambda: pretrain.Recipe(steps=10, warmup=10), ValueError,
     r"need 0 <= warmup < steps; got warmup=10, steps=10"),
    (lambda: pretrain.Recipe(lr=float("inf")), ValueError,
     r"Recipe.lr must be a finite number in \(0, inf\); got float inf"),
    (lambda: pretrain.Recipe(lr=0.0), ValueError,
     r"Recipe.lr must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: pretrain.Recipe(weight_decay=-1), ValueError,
     r"Recipe.weight_decay must be a finite number in \[0, inf\); got int -1"),
    (lambda: pretrain.Recipe(clip=0), ValueError,
     r"Recipe.clip must be a finite number in \(0, inf\); got int 0"),
    (lambda: pretrain.Recipe(final=2.5), ValueError,
     r"final \(a fraction of the peak rate\) must be a finite number in \[0, 1\]"),
    (lambda: pretrain.Recipe(betas=(1.0, 0.9)), ValueError,
     r"Recipe.betas must be two numbers in \[0, 1\); got tuple \(1.0, 0.9\)"),
    (lambda: pretrain.Recipe(seed=-1), ValueError, r"Recipe.seed must be an int >= 0"),
    (lambda: pretrain.with_steps(pretrain.Recipe(), 0), ValueError,
     r"steps must be an int >= 1; got int 0"),
    (lambda: pretrain.with_steps(pretrain.Recipe(), float("inf")), ValueError,
     r"steps must be an int >= 1; got float inf"),
    (lambda: pretrain.optimizer(tiny(), {"lr": 1e-3}), TypeError,
     r"recipe must be a Recipe; got dict"),
    (lambda: pretrain.optimizer("gpt", pretrain.Recipe()), TypeError,
     r"model must be a gpt.GPT; got str 'gpt'"),
    (lambda: pretrain.pretrained("laptop"), ValueError,
     r"profile must be one of \['cpu', 'gpu', 'nanogpt', 'smoke'\]; got 'laptop'"),
    (lambda: pretrain.pretrained("smoke", progress=1), TypeError,
     r"progress must be a bool; got int 1"),
    (lambda: pretrain.save_pretrained("cpu", tiny(), None), ValueError,
     r"model's config is not the cpu recipe's"),
    # shakespeare takes no argument: Python's own TypeError names it
    (lambda: pretrain.shakespeare("tinyshakespeare"), TypeError,
     r"shakespeare\(\) takes 0 positional arguments but 1 was given"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
